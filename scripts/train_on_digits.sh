#!/usr/bin/env bash
# Trains the default net (lenet) on the embedded digits dataset across N clones, then
# evaluates it on the test split and prints the accuracy. Needs no download.
#
# Usage: scripts/train_on_digits.sh [NUM_CLONES=2] [TRAIN_DIR=/tmp/slim_deploy/digits]
# Set PYTHON to choose the interpreter (default: python3).
set -euo pipefail
num_clones=${1:-2}
train_dir=${2:-/tmp/slim_deploy/digits}
repo=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-python3}

"$python" "$repo/train_image_classifier.py" --train_dir="$train_dir" \
  --num_clones="$num_clones" --dataset_name=digits --model_name=lenet
"$python" "$repo/eval_image_classifier.py" --checkpoint_path="$train_dir" \
  --eval_dir="$train_dir/eval"  # The run's model and dataset; the test split.
