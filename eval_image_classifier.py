r"""Evaluates a trained classifier on every example of a split, exactly once.

    python eval_image_classifier.py --checkpoint_path=/tmp/tfmodel --eval_dir=/tmp/tfmodel/eval

Pointed at a training run (its train_dir or one of its checkpoints), it evaluates the
run's model on the run's dataset, with the run's input settings, unless flags say
otherwise. Prints accuracy, recall@5 and the number of examples, and writes them with the
checkpoint's global step to eval_dir/metrics.json (keys accuracy, recall_5, num_examples,
global_step) and to a TensorBoard event file in eval_dir. Several clones split each
step's batches. The work is image_classifier.evaluate.evaluate(EvalConfig).
"""
from image_classifier import quiet

quiet.start()  # Before TensorFlow is imported.

from image_classifier import cli, config, evaluate, slim_flags  # noqa: E402

slim_flags.define(config.EvalConfig, __name__)


def main(argv):
    del argv
    metrics = evaluate.evaluate(slim_flags.eval_config())
    print(f'accuracy {metrics["accuracy"]:.4f}  recall@5 {metrics["recall_5"]:.4f}  '
          f'examples {metrics["num_examples"]}  global step {metrics["global_step"]}')


def run():
    """Console-script entry point."""
    cli.run(main, __name__)


if __name__ == '__main__':
    run()
