"""export(config): writes a classifier's inference graph (slim's GraphDef) and/or a
SavedModel.

The GraphDef holds the network in eval mode (or training mode with is_training) behind a
float32 placeholder named 'input' of shape [batch_size, image_size, image_size, channels],
without variable values (slim's format, for freeze_graph). The SavedModel holds the
checkpoint's values and a 'serving_default' signature: input 'images' (float32 [N,
image_size, image_size, channels], preprocessed as for evaluation) -> 'logits' and
'probabilities' (float32 [N, num_classes]).
"""
import os

from absl import logging
import tensorflow.compat.v1 as tf

from slim_deploy.deployment import checkpoints, fileio
from slim_deploy.deployment.errors import UsageError
from slim_deploy.image_classifier import config as run_config
from slim_deploy.nets import nets_factory


def export(config):
    """Writes what `config` (an ExportConfig) asks for; returns {'output_file': path,
    'saved_model_dir': path} of what it wrote. Raises UsageError when the checkpoint is
    missing or saved_model_dir is not empty."""
    if config.saved_model_dir and os.path.exists(config.saved_model_dir) and (
            not os.path.isdir(config.saved_model_dir) or os.listdir(config.saved_model_dir)):
        raise UsageError(f'--saved_model_dir {config.saved_model_dir!r} already exists and is '
                         'not empty; choose a new directory')
    checkpoint = (checkpoints.resolve_checkpoint(config.checkpoint_path)
                  if config.checkpoint_path else None)
    written = {}
    with tf.Graph().as_default() as graph:
        images, logits, probabilities = _inference_graph(config)
        if config.output_file:
            graph_def = graph.as_graph_def()
            fileio.write_atomically(config.output_file, str(graph_def)
                                    if config.write_text_graphdef
                                    else graph_def.SerializeToString())
            written['output_file'] = config.output_file
            logging.info('Wrote the inference GraphDef to %s', config.output_file)
        if config.saved_model_dir:
            _write_saved_model(config.saved_model_dir, checkpoint, images, logits,
                               probabilities)
            written['saved_model_dir'] = config.saved_model_dir
            logging.info('Wrote a SavedModel of %s to %s', checkpoint, config.saved_model_dir)
    return written


def _inference_graph(config):
    """Adds the network behind placeholder 'input'; returns (input, logits, probabilities)."""
    model = config.model
    network_fn = nets_factory.get_network_fn(model.model_name, config.num_classes,
                                             is_training=config.is_training)
    size = model.image_size_or_default()
    channels = run_config.input_channels(config.dataset_name, model)
    images = tf.placeholder(tf.float32, [config.batch_size, size, size, channels], name='input')
    logits, _ = network_fn(images)
    return images, logits, tf.nn.softmax(logits, name='probabilities')


def _write_saved_model(directory, checkpoint, images, logits, probabilities):
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
