#!/usr/bin/env bash
# Fine-tunes Inception v3 from TF-Slim's ImageNet checkpoint (inception_v3.ckpt, which you
# download yourself) on Flowers (converted into DATASET_DIR by download_and_convert_data.py
# --dataset_name=flowers): first the new logits layers alone, then every layer.
#
# Usage: scripts/finetune_inception_v3_on_flowers.sh DATASET_DIR CHECKPOINT [TRAIN_DIR=/tmp/slim_deploy/flowers] [NUM_CLONES=2]
set -euo pipefail
dataset_dir=${1:?usage: $0 DATASET_DIR CHECKPOINT [TRAIN_DIR] [NUM_CLONES]}
checkpoint=${2:?usage: $0 DATASET_DIR CHECKPOINT [TRAIN_DIR] [NUM_CLONES]}
train_dir=${3:-/tmp/slim_deploy/flowers}
num_clones=${4:-2}
repo=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-python3}
new_layers=InceptionV3/Logits,InceptionV3/AuxLogits
common=(--dataset_name=flowers --dataset_split_name=train --dataset_dir="$dataset_dir"
        --model_name=inception_v3 --num_clones="$num_clones" --batch_size=32
        --optimizer=rmsprop --weight_decay=0.00004 --log_every_n_steps=100
        --save_interval_secs=120 --save_summaries_secs=120)

# 1. The new 5-class logits layers only, the rest restored from the ImageNet checkpoint.
"$python" "$repo/train_image_classifier.py" --train_dir="$train_dir" "${common[@]}" \
  --checkpoint_path="$checkpoint" --checkpoint_exclude_scopes="$new_layers" \
  --trainable_scopes="$new_layers" --max_number_of_steps=1000 --learning_rate=0.01 \
  --learning_rate_decay_type=fixed
"$python" "$repo/eval_image_classifier.py" --checkpoint_path="$train_dir" \
  --eval_dir="$train_dir/eval" --dataset_split_name=validation  # The run's model and data.

# 2. Every layer, at a lower rate, for 500 steps from the weights of stage 1.
"$python" "$repo/train_image_classifier.py" --train_dir="$train_dir/all" "${common[@]}" \
  --checkpoint_path="$train_dir" --max_number_of_steps=500 --learning_rate=0.0001 \
  --learning_rate_decay_type=fixed
"$python" "$repo/eval_image_classifier.py" --checkpoint_path="$train_dir/all" \
  --eval_dir="$train_dir/all/eval" --dataset_split_name=validation
