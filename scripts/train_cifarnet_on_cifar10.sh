#!/usr/bin/env bash
# Trains CifarNet on CIFAR-10 (converted into DATASET_DIR by download_and_convert_data.py
# --dataset_name=cifar10), then evaluates it on the test split.
#
# Usage: scripts/train_cifarnet_on_cifar10.sh DATASET_DIR [TRAIN_DIR=/tmp/slim_deploy/cifarnet] [NUM_CLONES=2]
set -euo pipefail
dataset_dir=${1:?usage: $0 DATASET_DIR [TRAIN_DIR] [NUM_CLONES]}
train_dir=${2:-/tmp/slim_deploy/cifarnet}
num_clones=${3:-2}
repo=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-python3}

# slim's recipe: SGD at 0.1 decaying 0.1x every 200 epochs, 100000 steps of 128 per clone.
"$python" "$repo/train_image_classifier.py" --train_dir="$train_dir" \
  --dataset_name=cifar10 --dataset_split_name=train --dataset_dir="$dataset_dir" \
  --model_name=cifarnet --preprocessing_name=cifarnet --num_clones="$num_clones" \
  --max_number_of_steps=100000 --batch_size=128 --learning_rate=0.1 \
  --learning_rate_decay_factor=0.1 --num_epochs_per_decay=200 --optimizer=sgd \
  --weight_decay=0.004 --save_interval_secs=120 --save_summaries_secs=120 \
  --log_every_n_steps=100
"$python" "$repo/eval_image_classifier.py" --checkpoint_path="$train_dir" \
  --eval_dir="$train_dir/eval"  # The run's model and dataset; the test split.
