#!/usr/bin/env bash
# Trains lenet on the embedded digits dataset as a local cluster of parameter servers and
# workers (each worker running 2 clones), then evaluates it on the test split and prints the
# accuracy. Needs no download; shows the launcher and the cluster flags at work.
#
# Usage: scripts/train_cluster_on_digits.sh [NUM_PS=1] [NUM_WORKERS=2] [TRAIN_DIR] [FLAG...]
# FLAGs go to every task of train_image_classifier.py, e.g. --sync_replicas
# --replicas_to_aggregate=2 or --max_number_of_steps=200. Set PYTHON to choose the
# interpreter (default: python3).
set -euo pipefail
num_ps=${1:-1}
num_workers=${2:-2}
train_dir=${3:-/tmp/slim_deploy/digits_cluster}
shift $(( $# < 3 ? $# : 3 ))
repo=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-python3}

cd "$repo"
"$python" -m slim_deploy.cluster.launch --num_ps_tasks "$num_ps" --worker_replicas "$num_workers" -- \
  "$python" train_image_classifier.py --train_dir="$train_dir" --dataset_name=digits \
  --model_name=lenet --num_clones=2 "$@"
"$python" eval_image_classifier.py --checkpoint_path="$train_dir" \
  --eval_dir="$train_dir/eval"  # The run's model and dataset; the test split.
