r"""slim's post_training_quantization: an int8 TensorFlow Lite model of a float checkpoint,
its activation ranges calibrated on images of a dataset split.

    python -m nets.post_training_quantization --model_name=mobilenet_v1 \
        --checkpoint_path=TRAIN_DIR --dataset_dir=IMAGENET --output_tflite=model.tflite

As slim's: --model_name (a name of nets_factory) is built for inference on a float32
[1, --image_size, --image_size, channels] input named 'images', its output the softmax of
its --num_classes logits; the variables are restored from --checkpoint_path (with
--enable_ema, the default, from their exponential moving averages: the variables of
tf.train.ExponentialMovingAverage, '<variable>/ExponentialMovingAverage'); the first
--num_steps images of --dataset_split calibrate the ranges, each cropped to its center
(less a margin of 32 / (--image_size + 32) of its shorter side), resized bicubically to
--image_size and scaled to [-1, 1] (with --use_model_specific_preprocessing, the model's
evaluation preprocessing instead); the model is full-integer, int8 weights, activations,
input and output (TFLite's builtin int8 ops), written to --output_tflite.

What differs from slim's:
- The calibration images come from --dataset_dir's TFRecords, the split --dataset_split of
  --dataset_name through dataset_factory (slim's read them with tensorflow_datasets, which
  slim-deploy does not depend on, and downloaded them when missing): 'imagenet2012', slim's
  default and tensorflow_datasets' name, is dataset_factory's 'imagenet'.
- The input has the dataset's channels (1 for mnist and the digits; slim's always had 3).
- --checkpoint_path may name a directory (its latest checkpoint). A checkpoint that lacks a
  variable of the model, or holds it in another shape, ends in one line naming it (and,
  with --enable_ema, --noenable_ema for a checkpoint trained without moving averages).
- --output_tflite is written atomically; a user's mistake ends in one line, exit code 2.
- It defines flags that its sibling scripts (mobilenet_v1_train, mobilenet_v1_eval) define
  too, overridable, so that they import together in one process (slim's raised
  DuplicateFlagError); the module imported last sets the defaults.
"""
if __name__ == '__main__':  # Run as a script: quiet TensorFlow's start-up, before importing it.
    from slim_deploy.image_classifier import verbosity
    verbosity.start()

import functools  # noqa: E402
import os  # noqa: E402

from absl import flags  # noqa: E402
import tensorflow.compat.v1 as tf  # noqa: E402

from slim_deploy.common import fileio  # noqa: E402
from slim_deploy.common.errors import UsageError  # noqa: E402
from slim_deploy.datasets import dataset_factory  # noqa: E402
from slim_deploy.deployment import tflite  # noqa: E402
from slim_deploy.nets import nets_factory  # noqa: E402
from slim_deploy.preprocessing import preprocessing_factory  # noqa: E402
from slim_deploy.training import checkpoints  # noqa: E402

FLAGS = flags.FLAGS

# tensorflow_datasets' names of the datasets slim's script read, to dataset_factory's.
_DATASET_NAMES = {'imagenet2012': 'imagenet'}
_MEAN_RGB = 127.5  # Calibration images become (pixel - _MEAN_RGB) / _STD_RGB, in [-1, 1].
_STD_RGB = 127.5
_CROP_PADDING = 32  # Pixels of --image_size's scale left around the central crop.
# The flags the script needs given, as slim's.
_REQUIRED_FLAGS = ('model_name', 'checkpoint_path', 'dataset_dir', 'output_tflite')


# slim's flags, which its sibling scripts share (mobilenet_v1_train, mobilenet_v1_eval and
# post_training_quantization define several of the same names): allow_override lets one
# process import them all, the flag defined last setting the default.
flags.DEFINE_string('model_name', None, 'The network to convert, a name of nets_factory.',
                    allow_override=True)
flags.DEFINE_string('checkpoint_path', None, 'Its checkpoint, or a directory: the latest.',
                    allow_override=True)
flags.DEFINE_string('dataset_name', 'imagenet2012', 'The dataset whose images calibrate the '
                    f'ranges: {", ".join(dataset_factory.DATASETS)}, or imagenet2012 '
                    '(TensorFlow Datasets\' name of imagenet).', allow_override=True)
flags.DEFINE_string('dataset_dir', None, 'The directory of the dataset\'s TFRecord files.',
                    allow_override=True)
flags.DEFINE_string('dataset_split', 'train', 'The split whose images calibrate the ranges.',
                    allow_override=True)
flags.DEFINE_string('output_tflite', None, 'Where the int8 TensorFlow Lite model goes.',
                    allow_override=True)
flags.DEFINE_boolean('use_model_specific_preprocessing', False, 'Calibrate on the network\'s '
                     'own preprocessing (preprocessing_factory) instead of a central crop '
                     'scaled to [-1, 1].', allow_override=True)
flags.DEFINE_boolean('enable_ema', True, 'Restore the moving averages of the variables (as '
                     'trained with them), not the variables.', allow_override=True)
flags.DEFINE_integer('num_steps', 1000, 'How many images calibrate the ranges.',
                     allow_override=True)
flags.DEFINE_integer('image_size', 224, 'Side of the square input images, in pixels.',
                     allow_override=True)
flags.DEFINE_integer('num_classes', 1001, 'Width of the logits layer.', allow_override=True)


def _preprocess_for_quantization(image, image_size):
    """The central square crop of `image` (uint8 [height, width, channels]), less a margin
    of _CROP_PADDING / (image_size + _CROP_PADDING) of its shorter side, resized bicubically
    to float32 [image_size, image_size, channels] and scaled from [0, 255] to [-1, 1]."""
    shape = tf.shape(image)
    height, width = shape[0], shape[1]
    crop_size = tf.cast(image_size / (image_size + _CROP_PADDING) *
                        tf.cast(tf.minimum(height, width), tf.float32), tf.int32)
    image = tf.image.crop_to_bounding_box(image, (height - crop_size + 1) // 2,
                                          (width - crop_size + 1) // 2, crop_size, crop_size)
    image = tf.image.resize(image, [image_size, image_size],
                            method=tf.image.ResizeMethod.BICUBIC)
    return (image - _MEAN_RGB) / _STD_RGB


def restore_model(sess, checkpoint_path, enable_ema=True):
    """Initializes the variables of sess's graph, then restores them from checkpoint_path.

    enable_ema: restore the trainable variables and batch norm's moving statistics (and
      those of the 'moving_vars' collection) from their exponential moving averages,
      '<variable>/ExponentialMovingAverage', the others from themselves.
    Raises UsageError naming --checkpoint_path (and --noenable_ema, with enable_ema) when
    the checkpoint lacks a variable or holds it in another shape.
    """
    variables = {v.op.name: v for v in tf.global_variables()}
    if enable_ema:
        averaged = {name: v for name, v in variables.items()
                    if v.trainable or 'moving_mean' in name or 'moving_variance' in name}
        averaged.update({v.op.name: v for v in tf.get_collection('moving_vars')})
        variables = tf.train.ExponentialMovingAverage(decay=0.0).variables_to_restore(
            list(averaged.values()))
    mismatched = list(checkpoints.mismatched_variables(checkpoint_path, variables).values())
    if mismatched:
        hint = ('; pass --noenable_ema for a checkpoint without moving averages'
                if enable_ema else '; --model_name and --num_classes must be its model\'s')
        raise UsageError(f'--checkpoint_path {checkpoint_path!r} does not match '
                         f'{len(mismatched)} variables of the model{hint}: '
                         f'{"; ".join(mismatched[:3])}')
    sess.run(tf.global_variables_initializer())
    tf.train.Saver(variables, max_to_keep=1).restore(sess, checkpoint_path)


def _calibration_data(split, preprocess, num_steps):
    """A function returning an iterator over the calibration inputs: [image] for each of
    the first num_steps images of `split` (a dataset_utils.DatasetSplit; fewer if it holds
    fewer), image float32 [1, image_size, image_size, channels] from preprocess(uint8
    image). Each call reads them anew, in a graph and session of its own."""
    def representative_data():
        graph = tf.Graph()
        with graph.as_default():
            dataset = tf.data.TFRecordDataset(split.files()).take(num_steps).map(
                lambda record: preprocess(split.parse(record)[0])[tf.newaxis])
            next_image = tf.data.make_one_shot_iterator(dataset).get_next()
        session = tf.Session(graph=graph)  # Not entered: the caller keeps its own graph.
        try:
            while True:
                try:
                    yield [session.run(next_image)]
                except tf.errors.OutOfRangeError:
                    return
        finally:
            session.close()
    return representative_data


def main(unused_argv):
    """Writes --output_tflite, the int8 model of --checkpoint_path, and says so."""
    del unused_argv
    network_fn = nets_factory.get_network_fn(FLAGS.model_name, num_classes=FLAGS.num_classes,
                                             is_training=False)
    dataset_name = _DATASET_NAMES.get(FLAGS.dataset_name, FLAGS.dataset_name)
    split = dataset_factory.get_dataset_split(dataset_name, FLAGS.dataset_split,
                                              FLAGS.dataset_dir)
    checkpoint = checkpoints.resolve_checkpoint(FLAGS.checkpoint_path)
    fileio.check_writable_dir(os.path.dirname(os.path.abspath(FLAGS.output_tflite)),
                              '--output_tflite')
    image_size = FLAGS.image_size
    if FLAGS.use_model_specific_preprocessing:
        preprocess = functools.partial(
            preprocessing_factory.get_preprocessing(FLAGS.model_name),
            output_height=image_size, output_width=image_size)
    else:
        preprocess = functools.partial(_preprocess_for_quantization, image_size=image_size)
    with tf.Graph().as_default(), tf.Session() as sess:
        images = tf.placeholder(tf.float32, (1, image_size, image_size, split.channels),
                                name='images')
        logits, _ = network_fn(images)
        output = tf.nn.softmax(logits)
        restore_model(sess, checkpoint, enable_ema=FLAGS.enable_ema)
        model = tflite.convert(sess, [images], [output], 'int8', io_type='int8',
                               representative_data=_calibration_data(split, preprocess,
                                                                     FLAGS.num_steps))
    fileio.write_atomically(FLAGS.output_tflite, model)
    print(f'tflite model written to {FLAGS.output_tflite}')


if __name__ == '__main__':
    from slim_deploy.image_classifier import cli
    for required in _REQUIRED_FLAGS:
        flags.mark_flag_as_required(required)
    cli.run(main, __name__)
