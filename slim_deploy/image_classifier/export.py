"""export(config): writes a classifier's inference graph (slim's GraphDef), a SavedModel
and/or a TensorFlow Lite model.

The GraphDef holds the network in eval mode (or training mode with is_training), quantized
with quantize (quantize.create_eval_graph after the network, as slim's --quantize; its
weights per channel when the checkpoint holds such ranges, as train_image_classifier
--quantize_delay trains them, else per tensor, as tf.contrib.quantize's), behind a
float32 placeholder named 'input' of shape [batch_size, image_size, image_size, channels],
without variable values, its variables reference variables as under TF 1 (slim's format, for
TensorFlow's freeze_graph with the checkpoint). The SavedModel holds the
checkpoint's values and a 'serving_default' signature: input 'images' (float32 [N,
image_size, image_size, channels], preprocessed as for evaluation) -> 'logits' and
'probabilities' (float32 [N, num_classes]). The .tflite file holds the same graph, input
'input' -> outputs 'logits' and 'probabilities', converted with the quantization of
config.tflite_model_quantization (see deployment.tflite); post-training int8 quantization
calibrates on examples of the training split, preprocessed as for evaluation.
"""
import os

from absl import logging
import tensorflow.compat.v1 as tf

from slim_deploy.common import fileio
from slim_deploy.common.errors import UsageError
from slim_deploy.datasets import pipeline
from slim_deploy.deployment import quantize, tflite
from slim_deploy.image_classifier import builders
from slim_deploy.image_classifier import config as run_config
from slim_deploy.nets import nets_factory
from slim_deploy.training import checkpoints

# Seed of the shuffle that draws post-training quantization's examples.
REPRESENTATIVE_SEED = 0


def export(config):
    """Writes what `config` (an ExportConfig) asks for; returns {'output_file': path,
    'saved_model_dir': path, 'tflite_file': path} of what it wrote. Raises UsageError when
    the checkpoint is missing (or, with quantize, lacks the ranges of quantization-aware
    training), saved_model_dir is not empty, or post-training quantization finds no
    examples to calibrate on."""
    if config.saved_model_dir and os.path.exists(config.saved_model_dir) and (
            not os.path.isdir(config.saved_model_dir) or os.listdir(config.saved_model_dir)):
        raise UsageError(f'--saved_model_dir {config.saved_model_dir!r} already exists and is '
                         'not empty; choose a new directory')
    checkpoint = (checkpoints.resolve_checkpoint(config.checkpoint_path)
                  if config.checkpoint_path else None)
    representative_data = None
    if config.tflite_file and config.tflite_model_quantization == 'int8':
        representative_data = _representative_data(config)
    written = {}
    # Without a checkpoint, tf.contrib.quantize's rewrite (slim's); None: no ranges, which
    # restoring then reports.
    per_channel_wt = bool(checkpoint and quantize.checkpoint_per_channel_wt(checkpoint))
    if config.output_file:
        graph_def = _graph_def(config, per_channel_wt)
        with _room_checked(config.output_file):
            fileio.write_atomically(config.output_file, str(graph_def)
                                    if config.write_text_graphdef
                                    else graph_def.SerializeToString())
        written['output_file'] = config.output_file
        logging.info('Wrote the inference GraphDef to %s', config.output_file)
    if not (config.saved_model_dir or config.tflite_file):
        return written
    with tf.Graph().as_default():
        images, logits, probabilities = _inference_graph(config, per_channel_wt)
        if config.saved_model_dir:
            with _room_checked(config.saved_model_dir):
                _write_saved_model(config.saved_model_dir, checkpoint, config.quantize, images,
                                   logits, probabilities)
            written['saved_model_dir'] = config.saved_model_dir
            logging.info('Wrote a SavedModel of %s to %s', checkpoint, config.saved_model_dir)
        if config.tflite_file:
            with tf.Session() as sess:
                builders.restore(sess, checkpoint, quantized=config.quantize)
                model = tflite.convert(sess, [images], [logits, probabilities],
                                       config.tflite_model_quantization, config.tflite_io_type,
                                       representative_data)
            with _room_checked(config.tflite_file):
                fileio.write_atomically(config.tflite_file, model)
            written['tflite_file'] = config.tflite_file
            logging.info('Wrote a TensorFlow Lite model of %s (%s, %d bytes) to %s', checkpoint,
                         _tflite_story(config), len(model), config.tflite_file)
    return written


def _room_checked(path):
    """fileio.room_checked for the writing of `path` (written atomically: a failure leaves
    nothing of it)."""
    return fileio.room_checked(os.path.dirname(os.path.abspath(path)),
                               f'write {os.path.basename(path)}', lambda: 'nothing of it is left')


def _tflite_story(config):
    """'int8 calibrated on 100 examples, int8 input and output': how the .tflite of
    `config` is quantized."""
    quantization = config.tflite_model_quantization
    if config.quantize:
        quantization += (' with the ranges of quantization-aware training, the input\'s '
                         f'calibrated on {config.representative_steps} examples')
    elif quantization == 'int8':
        quantization += f' calibrated on {config.representative_steps} examples'
    return f'{quantization}, {config.tflite_io_type} input and output'


def _graph_def(config, per_channel_wt):
    """The GraphDef of _inference_graph as TF 1 wrote it: its variables reference variables
    (VariableV2), which TensorFlow's freeze_graph restores from a checkpoint (into resource
    variables, TensorFlow 2's, it cannot)."""
    with tf.Graph().as_default() as graph, tf.variable_scope(tf.get_variable_scope(),
                                                             use_resource=False):
        _inference_graph(config, per_channel_wt)
    return graph.as_graph_def()


def _inference_graph(config, per_channel_wt):
    """Adds the network behind placeholder 'input', quantized if config.quantize (with
    quantize's per_channel_wt); returns (input, logits, probabilities), the last two named
    'logits' and 'probabilities'."""
    model = config.model
    network_fn = nets_factory.get_network_fn(model.model_name, config.num_classes,
                                             is_training=config.is_training)
    size = model.image_size_or_default()
    channels = run_config.input_channels(config.dataset_name, model)
    images = tf.placeholder(tf.float32, [config.batch_size, size, size, channels], name='input')
    logits, _ = network_fn(images)
    logits = tf.identity(logits, name='logits')
    probabilities = tf.nn.softmax(logits, name='probabilities')
    if config.quantize:
        quantize.create_eval_graph(per_channel_wt=per_channel_wt)
    return images, logits, probabilities


def _representative_data(config):
    """The representative_data of tflite.convert for int8 quantization: the
    config.representative_steps first examples (batches of one) of config.dataset_split_name
    in an order shuffled with REPRESENTATIVE_SEED, preprocessed for evaluation as the
    network's input. Raises UsageError naming the flag when the split's files are missing."""
    data = run_config.DataConfig(
        dataset_name=config.dataset_name, dataset_split_name=config.dataset_split_name,
        dataset_dir=config.dataset_dir, labels_offset=config.labels_offset, batch_size=1)
    calibrated = ("the input's range (the others are training's)" if config.quantize else
                  'its ranges (post-training quantization)')
    try:
        classifier = builders.classifier(data, config.model, is_training=False)
    except UsageError as e:
        raise UsageError(f'--tflite_quantization=int8 calibrates {calibrated} on examples of '
                         f'split {config.dataset_split_name!r}: {e}') from None

    def batches():
        guard = pipeline.RecordGuard()
        with tf.Graph().as_default():
            images, _ = tf.data.make_one_shot_iterator(classifier.training_batches(
                data, seed=REPRESENTATIVE_SEED, guard=guard)).get_next()
            with tf.Session() as sess, guard.raising():
                for _ in range(config.representative_steps):
                    yield [sess.run(images)]
    return batches


def _write_saved_model(directory, checkpoint, quantized, images, logits, probabilities):
    """Writes a SavedModel with the checkpoint's values, built in a temporary directory
    next to `directory` and renamed into place (removed if anything fails)."""
    signature = tf.saved_model.predict_signature_def(
        inputs={'images': images}, outputs={'logits': logits, 'probabilities': probabilities})
    with fileio.atomic_path(directory) as temporary, tf.Session() as sess:
        builder = tf.saved_model.Builder(temporary)
        builders.restore(sess, checkpoint, quantized=quantized)
        builder.add_meta_graph_and_variables(
            sess, [tf.saved_model.SERVING],
            signature_def_map={tf.saved_model.DEFAULT_SERVING_SIGNATURE_DEF_KEY: signature})
        builder.save()
