r"""slim's mobilenet_v1_eval: evaluates a MobileNet v1 checkpoint with slim.evaluation, in
float or, with --quantize, as the quantized model (tf.contrib.quantize's evaluation
rewrite, which slim_deploy.deployment.quantize provides).

    python -m nets.mobilenet_v1_eval --dataset_dir=IMAGENET --checkpoint_dir=QUANTIZED \
        --quantize --eval_dir=QUANTIZED/eval

As slim's: ceil(--num_examples / --batch_size) batches of the 'validation' split of
--dataset_dir's TFRecords, in order, through slim's DatasetDataProvider and a batching
queue, with MobileNet v1's (Inception's) evaluation preprocessing to --image_size pixels;
the metrics, the accuracy and the recall at 5, are printed to standard error at the end
('eval/Accuracy[0.7012]') and written as summaries ('eval/Accuracy', 'eval/Recall_5') into
--eval_dir (none when it is empty). --quantize evaluates the model mobilenet_v1_train
--quantize trained: batch norm folded into the weights, weights and activations quantized
on the ranges its checkpoint holds.

What differs from slim's:
- --dataset_name (default 'imagenet', slim's only choice) and --dataset_split_name (default
  'validation') evaluate any split of any dataset of dataset_factory.
- --checkpoint_dir may be the training directory (its latest checkpoint is evaluated; slim
  passed it to evaluate_once, which takes a checkpoint's prefix) or a checkpoint's prefix.
- Recall_5 is left out below 5 classes.
- A user's mistake (a bad flag, a dataset without files, no checkpoint, a checkpoint that
  lacks a variable of the model, such as a float one evaluated with --quantize, or holds
  per-channel weight ranges, as train_image_classifier --quantize_delay trains them) ends in
  one line, exit code 2.
- Its sibling scripts (mobilenet_v1_train, mobilenet_v1_eval, post_training_quantization)
  import together in one process (slim's raised DuplicateFlagError): the flags train and
  eval share are defined once, in mobilenet_v1_input, and every flag is overridable, the
  module imported last setting the defaults.
"""
if __name__ == '__main__':  # Run as a script: quiet TensorFlow's start-up, before importing it.
    from slim_deploy.image_classifier import verbosity
    verbosity.start()

import math  # noqa: E402

import tensorflow.compat.v1 as tf  # noqa: E402
import tf_slim as slim  # noqa: E402

from slim_deploy.common.errors import UsageError  # noqa: E402
from slim_deploy.deployment import quantize  # noqa: E402
from slim_deploy.nets import mobilenet_v1  # noqa: E402
from slim_deploy.slim_scripts import mobilenet_v1_input  # noqa: E402
from slim_deploy.training import checkpoints  # noqa: E402

flags = tf.app.flags
FLAGS = flags.FLAGS


# slim's flags: those mobilenet_v1_train shares, defined once (mobilenet_v1_input), then this
# script's own. All are overridable (allow_override), so that the sibling scripts
# (post_training_quantization defines some of the same names) import together in one
# process, the flag defined last setting the default.
mobilenet_v1_input.define_flags(batch_size=250)
flags.adopt_module_key_flags(mobilenet_v1_input)
flags.DEFINE_integer('num_examples', 50000, 'How many images to score.', allow_override=True)
flags.DEFINE_string('eval_dir', '', 'Where the evaluation\'s event files go.',
                    allow_override=True)
flags.DEFINE_string('dataset_split_name', 'validation', 'The split of --dataset_name to score '
                    '(slim\'s is always ImageNet\'s validation split).', allow_override=True)


def imagenet_input(is_training):
    """Batches of --dataset_name's 'train' split (is_training: shuffled, randomly
    distorted) or --dataset_split_name split, from --dataset_dir.

    Returns (images, labels): float32 [batch_size, image_size, image_size, channels] in
    [-1, 1], and int64 [batch_size] labels.
    """
    split_name = 'train' if is_training else FLAGS.dataset_split_name
    return mobilenet_v1_input.batches(FLAGS.dataset_name, split_name, FLAGS.dataset_dir,
                                      FLAGS.image_size, FLAGS.batch_size, is_training)


def metrics(logits, labels):
    """The streaming metrics of `logits` [batch, classes] against int `labels` [batch]:
    'Accuracy' and, with 5 classes or more, 'Recall_5', each with a summary 'eval/<name>'
    that prints its value when it runs.

    Returns the list of their update ops, to run on each batch.
    """
    labels = tf.reshape(labels, [-1])
    metric_map = {'Accuracy': tf.metrics.accuracy(labels, tf.argmax(logits, axis=1))}
    if logits.shape[-1] >= 5:
        metric_map['Recall_5'] = tf.metrics.recall_at_k(labels, logits, 5)
    names_to_values, names_to_updates = slim.metrics.aggregate_metric_map(metric_map)
    for name, value in names_to_values.items():
        slim.summaries.add_scalar_summary(value, name, prefix='eval', print_summary=True)
    return list(names_to_updates.values())


def build_model():
    """Builds the evaluation graph: inputs, MobileNet v1 in inference mode, with --quantize
    the evaluation rewrite, and the metrics.

    Returns (g, eval_ops): the tf.Graph and the metrics' update ops.
    """
    g = tf.Graph()
    with g.as_default():
        inputs, labels = imagenet_input(is_training=False)
        with slim.arg_scope(mobilenet_v1.mobilenet_v1_arg_scope(is_training=False,
                                                                weight_decay=0.0)):
            logits, _ = mobilenet_v1.mobilenet_v1(
                inputs, is_training=False, depth_multiplier=FLAGS.depth_multiplier,
                num_classes=FLAGS.num_classes)
        if FLAGS.quantize:  # The logits' squeeze then reads the last layer's quantized output.
            quantize.create_eval_graph()
        eval_ops = metrics(logits, labels)
    return g, eval_ops


def eval_model():
    """Evaluates --checkpoint_dir's latest checkpoint (or the checkpoint it names) once on
    ceil(--num_examples / --batch_size) batches; the metrics' summaries print them."""
    checkpoint = checkpoints.resolve_checkpoint(FLAGS.checkpoint_dir, '--checkpoint_dir')
    g, eval_ops = build_model()
    _check_variables(checkpoint, g.get_collection(tf.GraphKeys.GLOBAL_VARIABLES))
    with g.as_default():
        slim.evaluation.evaluate_once(
            FLAGS.master, checkpoint, logdir=FLAGS.eval_dir,
            num_evals=math.ceil(FLAGS.num_examples / FLAGS.batch_size), eval_op=eval_ops)


def _check_variables(checkpoint, variables):
    """Raises UsageError naming --checkpoint_dir unless `checkpoint` holds each of
    `variables` in its shape (a float checkpoint lacks the ranges --quantize reads), and
    naming --quantize when it holds per-channel weight ranges."""
    if FLAGS.quantize and quantize.checkpoint_per_channel_wt(checkpoint):
        raise UsageError(f"--quantize evaluates tf.contrib.quantize's rewrite, weights per "
                         f'tensor, but --checkpoint_dir {checkpoint!r} holds weight ranges per '
                         'channel (train_image_classifier --quantize_delay trains them, for '
                         'int8 models): evaluate it with eval_image_classifier --quantize')
    mismatched = list(checkpoints.mismatched_variables(
        checkpoint, {v.op.name: v for v in variables}).values())
    if mismatched:
        raise UsageError(f'--checkpoint_dir {checkpoint!r} does not match {len(mismatched)} '
                         'variables of the model (--num_classes, --depth_multiplier and '
                         f'--quantize must be its training\'s): {"; ".join(mismatched[:3])}')


def main(unused_arg):
    del unused_arg
    eval_model()


if __name__ == '__main__':
    from slim_deploy.image_classifier import cli
    cli.run(main, __name__)
