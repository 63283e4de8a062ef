#!/usr/bin/env bash
# Trains LeNet on MNIST (converted into DATASET_DIR by download_and_convert_data.py
# --dataset_name=mnist), then evaluates it on the test split.
#
# Usage: scripts/train_lenet_on_mnist.sh DATASET_DIR [TRAIN_DIR=/tmp/slim_deploy/lenet] [NUM_CLONES=2]
set -euo pipefail
dataset_dir=${1:?usage: $0 DATASET_DIR [TRAIN_DIR] [NUM_CLONES]}
train_dir=${2:-/tmp/slim_deploy/lenet}
num_clones=${3:-2}
repo=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-python3}

# slim's recipe: SGD at 0.01, fixed rate, 20000 steps of 50 examples per clone.
"$python" "$repo/train_image_classifier.py" --train_dir="$train_dir" \
  --dataset_name=mnist --dataset_split_name=train --dataset_dir="$dataset_dir" \
  --model_name=lenet --preprocessing_name=lenet --num_clones="$num_clones" \
  --max_number_of_steps=20000 --batch_size=50 --learning_rate=0.01 \
  --learning_rate_decay_type=fixed --optimizer=sgd --weight_decay=0 \
  --save_interval_secs=60 --save_summaries_secs=60 --log_every_n_steps=100
"$python" "$repo/eval_image_classifier.py" --checkpoint_path="$train_dir" \
  --eval_dir="$train_dir/eval"  # The run's model and dataset; the test split.
