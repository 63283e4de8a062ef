r"""Exports a classifier's inference graph (slim's GraphDef) and/or a SavedModel.

    python export_inference_graph.py --output_file=/tmp/lenet_inf_graph.pb
    python export_inference_graph.py --checkpoint_path=/tmp/tfmodel \
        --saved_model_dir=/tmp/lenet_saved_model

The GraphDef holds the network in eval mode behind a float32 placeholder named 'input' of
shape [batch_size, image_size, image_size, channels], without variable values (slim's
format, for freeze_graph). The SavedModel holds the checkpoint's values and a
'serving_default' signature: input 'images' (float32 [N, image_size, image_size,
channels], already preprocessed as for evaluation) -> 'logits' and 'probabilities'
(float32 [N, num_classes]).
"""
import os

from absl import flags

import deployment  # noqa: F401  (repairs tf-slim; must precede tf_slim use)
import tensorflow.compat.v1 as tf

from datasets import dataset_factory
from deployment import checkpoints, cli, fileio
from nets import nets_factory

flags.DEFINE_string('model_name', 'lenet', 'Network to export.')
flags.DEFINE_boolean('is_training', False, 'Export the training-mode graph.')
flags.DEFINE_integer('image_size', None, 'Image size; None means the network\'s default.')
flags.DEFINE_integer('batch_size', None, 'Batch size of the input; None leaves it open.')
flags.DEFINE_string('dataset_name', 'digits', 'Dataset the model was trained on (gives the '
                    'number of classes and image channels).')
flags.DEFINE_integer('labels_offset', 0, 'Labels offset used in training.')
flags.DEFINE_boolean('use_grayscale', False, 'The model takes one-channel images.')
flags.DEFINE_string('output_file', '', 'Where to write the GraphDef.')
flags.DEFINE_boolean('write_text_graphdef', False, 'Write the GraphDef as text.')
flags.DEFINE_string('checkpoint_path', None, 'Checkpoint (file or directory) whose values '
                    'go into the SavedModel.')
flags.DEFINE_string('saved_model_dir', '', 'Where to write the SavedModel (must not exist '
                    'or be empty).')

FLAGS = flags.FLAGS


def build_inference_graph(f):
    """Adds the network behind placeholder 'input'; returns (input, logits, probabilities)."""
    info = dataset_factory.get_info(f.dataset_name)
    network_fn = nets_factory.get_network_fn(
        f.model_name, info.num_classes - f.labels_offset, is_training=f.is_training)
    size = f.image_size or network_fn.default_image_size
    channels = 1 if f.use_grayscale else info.channels
    images = tf.placeholder(tf.float32, [f.batch_size, size, size, channels], name='input')
    logits, _ = network_fn(images)
    return images, logits, tf.nn.softmax(logits, name='probabilities')


def write_saved_model(directory, checkpoint, images, logits, probabilities):
    """Writes a SavedModel with the checkpoint's values, built in a temporary directory
    next to `directory` and renamed into place (removed if anything fails)."""
    signature = tf.saved_model.predict_signature_def(
        inputs={'images': images}, outputs={'logits': logits, 'probabilities': probabilities})
    with fileio.atomic_path(directory) as temporary, tf.Session() as sess:
        builder = tf.saved_model.Builder(temporary)
        tf.train.Saver().restore(sess, checkpoint)
        builder.add_meta_graph_and_variables(
            sess, [tf.saved_model.SERVING],
            signature_def_map={tf.saved_model.DEFAULT_SERVING_SIGNATURE_DEF_KEY: signature})
        builder.save()


def export(f):
    """Writes what flags `f` ask for; ValueError on bad flags."""
    if not f.output_file and not f.saved_model_dir:
        raise ValueError('nothing to export: pass --output_file and/or --saved_model_dir')
    if f.saved_model_dir:
        if not f.checkpoint_path:
            raise ValueError('--saved_model_dir needs --checkpoint_path (the values to export)')
        if os.path.exists(f.saved_model_dir) and (
                not os.path.isdir(f.saved_model_dir) or os.listdir(f.saved_model_dir)):
            raise ValueError(f'--saved_model_dir {f.saved_model_dir!r} already exists and is '
                             'not empty; choose a new directory')
    checkpoint = checkpoints.resolve_checkpoint(f.checkpoint_path) if f.checkpoint_path else None
    with tf.Graph().as_default() as graph:
        images, logits, probabilities = build_inference_graph(f)
        if f.output_file:
            graph_def = graph.as_graph_def()
            fileio.write_atomically(f.output_file, str(graph_def) if f.write_text_graphdef
                                    else graph_def.SerializeToString())
            tf.logging.info('Wrote the inference GraphDef to %s', f.output_file)
        if f.saved_model_dir:
            write_saved_model(f.saved_model_dir, checkpoint, images, logits, probabilities)
            tf.logging.info('Wrote a SavedModel of %s to %s', checkpoint, f.saved_model_dir)


def main(argv):
    del argv
    cli.setup_logging()
    try:
        export(FLAGS)
    except ValueError as e:
        cli.fail(e)


def run():
    """Console-script entry point."""
    cli.run(main, __name__)


if __name__ == '__main__':
    run()
