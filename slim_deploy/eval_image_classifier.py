r"""Evaluates a trained classifier on every example of a split, exactly once.

    python eval_image_classifier.py --checkpoint_path=/tmp/tfmodel --eval_dir=/tmp/tfmodel/eval
    python eval_image_classifier.py --checkpoint_path=/tmp/tfmodel --eval_dir=/tmp/tflite_eval \
        --tflite_file=/tmp/lenet_int8.tflite

Pointed at a training run (its train_dir or one of its checkpoints), it evaluates the
run's model on the run's dataset, with the run's input settings, unless flags say
otherwise. Prints accuracy, recall@5 and the number of examples, and writes them with the
checkpoint's global step to eval_dir/metrics.json (keys accuracy, recall_5, num_examples,
global_step) and to a TensorBoard event file in eval_dir. Several clones split each
step's batches. A run trained with --quantize_delay is evaluated quantized (--quantize, as
slim's; --noquantize for its float graph). With --tflite_file it scores that TensorFlow
Lite model instead, with the interpreter, on the same examples and metrics (metrics.json
only; no global step). The work is
slim_deploy.image_classifier.evaluate.evaluate(EvalConfig).

With --eval_interval_secs=S (and --checkpoint_path a train_dir) it evaluates each new
checkpoint as it appears, looking at most every S seconds, printing one line and
appending one JSON line to eval_dir/metrics.jsonl per checkpoint, until it has evaluated
the checkpoint of the run's last step or --timeout seconds pass without a new one
(slim_deploy.image_classifier.evaluate.evaluate_continuously).
"""
from slim_deploy.image_classifier import verbosity

verbosity.start()  # Before TensorFlow is imported.

from slim_deploy.image_classifier import cli, config, evaluate, slim_flags  # noqa: E402

slim_flags.define(config.EvalConfig, __name__)


def main(argv):
    del argv
    eval_config = slim_flags.eval_config()
    if eval_config.eval_interval_secs is None:
        _print(evaluate.evaluate(eval_config))
    else:
        evaluate.evaluate_continuously(eval_config, on_evaluated=_print)


def _print(metrics):
    step = metrics['global_step']
    print(f'accuracy {metrics["accuracy"]:.4f}  recall@5 {metrics["recall_5"]:.4f}  '
          f'examples {metrics["num_examples"]}' + (f'  global step {step}' if step is not None
                                                   else ''), flush=True)


def run():
    """Console-script entry point."""
    cli.run(main, __name__)


if __name__ == '__main__':
    run()
