"""TensorFlow Lite models of a graph: converted from a session, quantized or not, and run on
float32 arrays by TensorFlow's interpreter.

    model_bytes = tflite.convert(sess, [images], [logits], 'int8', io_type='int8',
                                 representative_data=lambda: ([batch] for batch in batches))
    logits = tflite.Model(model_bytes)(images_array)['logits']

The quantizations, by name (QUANTIZATIONS, flag --tflite_quantization):
  float    none: float32 weights and math, as the graph computes.
  float16  float16 weights, float32 math (about half the size).
  dynamic  int8 weights, float32 activations (dynamic-range quantization).
  int8     int8 weights and activations (full-integer): a tensor's range is that of the
           graph's fake-quantization op on it (quantization-aware training: its weights
           must be quantized symmetric, as quantize's per_channel_wt quantizes them), else
           calibrated on representative inputs (post-training quantization; with
           quantization-aware training, the model's input alone, which training does not
           quantize).
Only an int8 model may take and give int8 or uint8 tensors (IO_TYPES, flag
--tflite_io_type); Model quantizes its float32 inputs and dequantizes its outputs with the
scale and zero point the model records.
"""
import contextlib
import dataclasses
import functools
import logging
import re
import warnings

import numpy as np
import tensorflow.compat.v1 as tf
from tensorflow.lite.tools import flatbuffer_utils

from slim_deploy.common import native_stderr
from slim_deploy.common.errors import UsageError
from slim_deploy.common.registry import Registry


@dataclasses.dataclass(frozen=True)
class Quantization:
    """The converter settings of a quantization. optimize: TensorFlow Lite's default
    optimizations (quantizing the weights); weight_type: the type stored weights get
    (None: int8 when optimizing); integer: activations in int8 too."""
    optimize: bool = False
    weight_type: object = None
    integer: bool = False


QUANTIZATIONS = Registry('tflite_quantization', {
    'float': Quantization(),
    'float16': Quantization(optimize=True, weight_type=tf.float16),
    'dynamic': Quantization(optimize=True),
    'int8': Quantization(optimize=True, integer=True),
})
IO_TYPES = Registry('tflite_io_type', {'float32': tf.float32, 'int8': tf.int8,
                                       'uint8': tf.uint8})

# What the converter and the interpreter print to stderr however quiet TensorFlow is asked
# to be (calibration's settings, the default delegate), and log at INFO through absl.
_NATIVE_NOISE = re.compile(r'fully_quantize: \d+, inference_type: .*'
                           r'|INFO: Created TensorFlow Lite XNNPACK delegate for CPU\.')
_LOGGED_NOISE = 'Using experimental converter'
# Fake quantization with the range as inputs (tf.quantization.fake_quant_with_min_max_vars*).
_FAKE_QUANT_OPS = frozenset({'FakeQuantWithMinMaxVars', 'FakeQuantWithMinMaxVarsPerChannel'})
# TensorFlow Lite's ops whose input 1 holds weights, which their int8 kernels take symmetric.
_WEIGHTED_OPS = frozenset({'CONV_2D', 'DEPTHWISE_CONV_2D', 'FULLY_CONNECTED'})


def convert(session, inputs, outputs, quantization='float', io_type='float32',
            representative_data=None):
    """The TensorFlow Lite model (bytes) computing `outputs` from `inputs` (lists of tensors
    of session's graph, named in the model as their ops are) with the values the session
    holds in its variables.

    quantization: a QUANTIZATIONS name. representative_data (for 'int8' only, and needed
    then) is a function returning an iterable of calibration inputs, each a list of one
    float32 array per input (e.g. one [1, height, width, channels] batch of images). Without
    fake-quantization ops in the graph they set every range (post-training quantization);
    with them (quantization-aware training) the ops' ranges are used, and the inputs' own
    ranges (the least and greatest values, and 0) are the data's.
    io_type: an IO_TYPES name, the type of the model's inputs and outputs; int8 and uint8
    need quantization 'int8'. Raises UsageError naming the flag when they do not fit, or
    when an int8 model's weights are not symmetric (tf.contrib.quantize's asymmetric
    per-tensor ranges, which TensorFlow Lite's int8 kernels refuse or misread).
    """
    check_io_type(quantization, io_type)
    settings = QUANTIZATIONS[quantization]
    if settings.integer != (representative_data is not None):
        raise ValueError(f'{quantization} quantization takes representative_data '
                         f'{"always" if settings.integer else "never"}')
    input_names = [tensor.op.name for tensor in inputs]
    output_names = [tensor.op.name for tensor in outputs]
    graph_def = tf.graph_util.convert_variables_to_constants(
        session, session.graph.as_graph_def(), output_names)
    quantization_aware = any(node.op in _FAKE_QUANT_OPS for node in graph_def.node)
    if quantization_aware:
        graph_def = _with_constant_ranges(session, graph_def, output_names)
    # Converted in a graph of its own: one holding variables leads the converter to look for
    # their initializers in the frozen graph, and complain.
    with tf.Graph().as_default() as frozen:
        tf.import_graph_def(graph_def, name='')
        converter = tf.lite.TFLiteConverter(
            frozen.as_graph_def(), [frozen.get_tensor_by_name(t.name) for t in inputs],
            [frozen.get_tensor_by_name(t.name) for t in outputs])
        if settings.optimize:
            converter.optimizations = [tf.lite.Optimize.DEFAULT]
        if settings.weight_type is not None:
            converter.target_spec.supported_types = [settings.weight_type]
        if settings.integer:
            converter.inference_input_type = IO_TYPES[io_type]
            converter.inference_output_type = IO_TYPES[io_type]
        if settings.integer and quantization_aware:
            # TensorFlow 2.21's converter makes an int8 model of a graph with fake
            # quantization when told so and given its inputs' ranges; calibrating it instead
            # would quantize the weights anew, per tensor.
            converter.inference_type = tf.int8
            converter.quantized_input_stats = dict(zip(input_names,
                                                       _input_stats(representative_data)))
        elif settings.integer:
            converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
            converter.representative_dataset = representative_data
        with _without_noise():
            model = converter.convert()
    model_object = flatbuffer_utils.convert_bytearray_to_object(bytearray(model))
    if settings.integer:
        _check_symmetric_weights(model_object)
    _name_io(model_object, input_names, output_names)
    return bytes(flatbuffer_utils.convert_object_to_bytearray(model_object))


def _input_stats(representative_data):
    """[(mean, std)] of each input, as the converter's quantized_input_stats take them (real
    value = (int8 value - mean) / std): the int8 range covering the input's values in
    representative_data, and 0."""
    low, high = None, None
    for arrays in representative_data():
        lows = [float(np.min(array)) for array in arrays]
        highs = [float(np.max(array)) for array in arrays]
        low = lows if low is None else np.minimum(low, lows)
        high = highs if high is None else np.maximum(high, highs)
    stats = []
    for input_low, input_high in zip(low, high):
        input_low, input_high = min(input_low, 0.0), max(input_high, 0.0)
        scale = (input_high - input_low) / 255 or 1.0
        zero_point = int(np.clip(round(-128 - input_low / scale), -128, 127))
        stats.append((float(zero_point), 1 / scale))
    return stats


def _with_constant_ranges(session, graph_def, output_names):
    """`graph_def` (frozen from session's graph) with the ranges of its fake-quantization ops
    as constants, their values in `session`, and only what `output_names` need: the
    converter takes a range it cannot read as a constant (e.g. one a graph computes from its
    weights) for none, and folds the op away."""
    fake_quants = [node for node in graph_def.node if node.op in _FAKE_QUANT_OPS]
    ranges = session.run({node.name: session.graph.get_operation_by_name(node.name).inputs[1:3]
                          for node in fake_quants})
    constants = []
    for node in fake_quants:
        for position, end, value in zip((1, 2), ('min', 'max'), ranges[node.name]):
            constant = tf.make_tensor_proto(value)
            name = f'{node.name}/constant_{end}'
            constants.append(tf.NodeDef(name=name, op='Const', attr={
                'dtype': tf.AttrValue(type=constant.dtype),
                'value': tf.AttrValue(tensor=constant)}))
            node.input[position] = name
    graph_def.node.extend(constants)
    return tf.graph_util.extract_sub_graph(graph_def, output_names)


def _check_symmetric_weights(model_object):
    """Raises UsageError naming --tflite_quantization when a weights tensor of int8 model
    `model_object` (a flatbuffer object) has a zero point other than 0."""
    subgraph = model_object.subgraphs[0]
    asymmetric = sorted(
        subgraph.tensors[op.inputs[1]].name.decode() for op in subgraph.operators
        if flatbuffer_utils.opcode_to_name(model_object, op.opcodeIndex) in _WEIGHTED_OPS and
        np.any(getattr(subgraph.tensors[op.inputs[1]].quantization, 'zeroPoint', None)))
    if asymmetric:
        raise UsageError(
            f'--tflite_quantization=int8 needs weights quantized symmetric around 0, but the '
            f'weights of {len(asymmetric)} of its layers are asymmetric (the first: '
            f"{asymmetric[0]!r}), as tf.contrib.quantize's rewrite quantizes them: train with "
            "per-channel weights (quantize's per_channel_wt, train_image_classifier "
            "--quantize_delay) or convert to uint8 as TF 1 did (inference_type=tf.uint8)")


def _name_io(model_object, input_names, output_names):
    """Names the inputs and outputs of TensorFlow Lite model `model_object` (a flatbuffer
    object) as given (the converter renames those it makes integer from
    quantize-dequantize pairs)."""
    subgraph = model_object.subgraphs[0]
    for indices, names in ((subgraph.inputs, input_names), (subgraph.outputs, output_names)):
        for index, name in zip(indices, names):
            subgraph.tensors[index].name = name.encode()


def check_io_type(quantization, io_type):
    """Raises UsageError naming the flags unless `quantization` and `io_type` are registered
    and fit together (int8 and uint8 inputs and outputs need int8 quantization)."""
    integer = QUANTIZATIONS[quantization].integer
    if IO_TYPES.check(io_type) != 'float32' and not integer:
        raise UsageError(f'--tflite_io_type={io_type} needs --tflite_quantization=int8 (a '
                         f'{quantization} model takes and gives float32)')


class Model:
    """A TensorFlow Lite model with one input, run by TensorFlow's interpreter on float32
    arrays.

    input_shape: the input's shape (a tuple), its batch size None when the model takes any;
    output_shapes: {name: shape} of its outputs, in order, batch sizes None likewise.
    num_threads: the interpreter's threads (None: its default).
    """

    def __init__(self, model_content, num_threads=None):
        with warnings.catch_warnings():  # Its deprecation in favour of LiteRT is ours to heed.
            warnings.filterwarnings('ignore', r'\s*Warning: tf.lite.Interpreter is deprecated')
            self._interpreter = tf.lite.Interpreter(model_content=model_content,
                                                    num_threads=num_threads)
        inputs = self._interpreter.get_input_details()
        if len(inputs) != 1:
            raise ValueError(f'the model has {len(inputs)} inputs; Model runs models of one')
        self._input = inputs[0]
        self.input_shape = _shape(self._input)
        self.output_shapes = {detail['name']: _shape(detail)
                              for detail in self._interpreter.get_output_details()}
        self._allocated_batch = None

    @property
    def input_type(self):
        """The numpy type of the model's input (np.float32, np.int8 or np.uint8)."""
        return self._input['dtype']

    def __call__(self, batch):
        """{output name: float32 array} of the model on `batch` (float32 [N, *input_shape[1:]]).
        A model of a fixed batch size runs the batch in parts of that size, the last one
        padded with zeros."""
        batch = np.asarray(batch, np.float32)
        size = self.input_shape[0] or len(batch)
        parts = []
        for start in range(0, len(batch), size):
            part = batch[start:start + size]
            padded = np.concatenate([part, np.zeros((size - len(part), *part.shape[1:]),
                                                    np.float32)])
            outputs = self._invoke(padded)
            parts.append({name: value[:len(part)] for name, value in outputs.items()})
        return {name: np.concatenate([part[name] for part in parts])
                for name in self.output_shapes}

    def _invoke(self, batch):
        """The outputs on `batch`, whose size the model takes."""
        if self._allocated_batch != len(batch):
            if self.input_shape[0] is None:
                self._interpreter.resize_tensor_input(self._input['index'], batch.shape)
            with _without_noise():
                self._interpreter.allocate_tensors()
            self._allocated_batch = len(batch)
        self._interpreter.set_tensor(self._input['index'], quantized(batch, self._input))
        self._interpreter.invoke()
        return {detail['name']: _dequantized(self._interpreter.get_tensor(detail['index']),
                                             detail)
                for detail in self._interpreter.get_output_details()}


def _shape(detail):
    """The shape of the tensor of `detail` (an interpreter's tensor details) as a tuple,
    None for a size the model leaves open."""
    return tuple(None if size < 0 else int(size) for size in detail['shape_signature'])


def quantized(values, detail):
    """Float32 `values` as the tensor of `detail` (an interpreter's tensor details) takes
    them: rounded to its integer type with its scale and zero point, or unchanged."""
    dtype = detail['dtype']
    if not np.issubdtype(dtype, np.integer):
        return values.astype(dtype)
    scale, zero_point = detail['quantization']
    limits = np.iinfo(dtype)
    return np.clip(np.round(values / scale + zero_point), limits.min, limits.max).astype(dtype)


def _dequantized(values, detail):
    """The float32 values of integer tensor `values` (see quantized), or `values`."""
    if not np.issubdtype(detail['dtype'], np.integer):
        return values.astype(np.float32)
    scale, zero_point = detail['quantization']
    return ((values.astype(np.float32) - zero_point) * scale).astype(np.float32)


def _not_logged_noise(record):
    return not record.getMessage().startswith(_LOGGED_NOISE)


@contextlib.contextmanager
def _without_noise():
    """Inside the block, absl's log records of _LOGGED_NOISE are dropped, and what is written
    to file descriptor 2 (by native code too) is held back; after it, that is written to
    stderr without the lines _NATIVE_NOISE matches whole (all of it if the block raised)."""
    absl_logger = logging.getLogger('absl')
    absl_logger.addFilter(_not_logged_noise)
    try:
        with native_stderr.filtered(functools.partial(native_stderr.without_lines,
                                                      _NATIVE_NOISE)):
            yield
    finally:
        absl_logger.removeFilter(_not_logged_noise)
