r"""Trains an image classifier as N data-parallel clones (TF-Slim's flags and semantics).

    python train_image_classifier.py            # lenet on the embedded digits, 1 clone
    python train_image_classifier.py --dataset_name=cifar10 --dataset_dir=DIR \
        --model_name=cifarnet --num_clones=4 --train_dir=/tmp/cifarnet

batch_size is per clone: one global step consumes batch_size x num_clones examples
(x replicas_to_aggregate with --sync_replicas). Restarting the same command resumes from
the newest intact checkpoint in train_dir; --checkpoint_path only seeds a train_dir that has
none. SIGTERM or Ctrl-C ends the step in flight, checkpoints it and exits 143 or 130 within
--grace_period_secs. --quantize_delay=N trains quantization-aware from global step N (slim's
flag; -1, the default, trains in float), for an int8 model from export_inference_graph.

As a task of a cluster, named by TF_CONFIG or --ps_hosts/--worker_hosts/--job_name/--task,
a ps task serves the variables until SIGTERM, a worker trains through its own server
(the chief, worker 0, writes train_dir) and an evaluator task evaluates train_dir's
checkpoints as they appear; `python -m slim_deploy.cluster.launch` runs one locally.
slim_deploy.image_classifier.roles.run(TrainConfig) does the work of each task; this script turns
flags into the config.
"""
from slim_deploy.image_classifier import verbosity

verbosity.start()  # Before TensorFlow is imported.

from slim_deploy.image_classifier import cli, config, roles, slim_flags  # noqa: E402

slim_flags.define(config.TrainConfig, __name__)


def main(argv):
    del argv
    roles.run(slim_flags.train_config())


def run():
    """Console-script entry point."""
    cli.run(main, __name__)


if __name__ == '__main__':
    run()
