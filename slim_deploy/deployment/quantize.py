"""Quantization-aware training, as tf.contrib.quantize did it: rewrites of a graph-mode model.

    logits, _ = network_fn(images)                    # build the model (or deploy's clones)
    quantize.create_training_graph(quant_delay=2000)  # then rewrite it, before the gradients
    train_op = optimizer.minimize(loss)

    logits, _ = network_fn(images)                    # the same model, in eval mode
    logits = tf.identity(logits)                      # what reads it, before the rewrite
    quantize.create_eval_graph()                      # reads the ranges training learned

`from tensorflow.contrib import quantize` gives this module (slim_deploy.aliases), so slim's
scripts and TF 1 clients (DeepLab, the Object Detection API) run unchanged and get what
contrib gave them: weights quantized per tensor and asymmetric, the models TensorFlow Lite
converts to uint8 as TF 1 did (inference_type=tf.uint8 and quantized_input_stats).
per_channel_wt=True (the name NVIDIA's TensorFlow 1.15 gives it) quantizes the weights of
convolutions per output channel and symmetric instead, the models TensorFlow Lite converts
to int8 (tflite.convert); TensorFlow Lite's uint8 kernels take no per-channel weights, its
int8 kernels no asymmetric ones. DeploymentConfig(quantize_delay=N) has deploy() call the
training rewrite with per_channel_wt=True (train_image_classifier --quantize_delay: its
exporter writes int8 models). A checkpoint says which it holds (checkpoint_per_channel_wt):
the shapes of its weight ranges.

A rewrite changes the graph in place (the default graph when None): it changes what ops
read, not the tensors, so a tensor held from before it (the logits a network returned) is
the float one; what reads it afterwards reads the quantized one. It finds:

- Layers: each Conv2D, DepthwiseConv2dNative and MatMul whose weights are read from a
  variable (slim.conv2d, separable_conv2d (its depthwise and pointwise parts), depthwise
  convolutions, fully_connected; Keras and tf.compat.v1.layers alike), followed by a bias
  add, a batch norm (fused or not, NHWC, in training or eval mode; right after the layer,
  as slim's normalizer_fn puts it: one after a bias add is left as it is) or neither.
- Batch norm is folded into the layer: the layer runs with the weights w * gamma /
  sqrt(moving_variance + eps), which are what is quantized in training, evaluation and
  TFLite alike, and adds beta - moving_mean * gamma / sqrt(moving_variance + eps) (eval
  mode). In training mode the output is corrected to batch norm's with the batch's
  statistics, taken from the layer's float output (so that also runs): scaled by
  sqrt(moving_variance + eps) / sqrt(batch_variance + eps) and offset by beta - batch_mean
  * gamma / sqrt(batch_variance + eps); the moving averages keep their updates. From global
  step freeze_bn_delay on, the moving statistics replace the batch's and stop moving.
- Weights are fake-quantized to weight_bits (8) bits in the narrow range (levels 1..255
  of 8 bits), on the range of the weights themselves (folded ones included) widened to hold
  0, [min(w, 0), max(w, 0)], as contrib's; with symmetric, [-max|w|, max|w|] (0 exact and
  midway). With per_channel_wt, Conv2D and DepthwiseConv2dNative weights get one symmetric
  range per output channel (TensorFlow Lite's int8 kernels quantize those per axis) and
  MatMul weights one symmetric range (its FULLY_CONNECTED takes one weight scale). Training
  records the range in variables, which evaluation reads, as contrib's last-value ranges.
- Activations are fake-quantized to activation_bits (8) bits, asymmetric (with symmetric:
  on a range whose 0 is exact and midway), on a range [min, max] holding 0, the moving
  average (decay EMA_DECAY, debiased as contrib's, so the first batch sets it) of each
  batch's: the output of each layer's ReLU/ReLU6, or of the layer without one ('act_quant';
  'conv_quant' when it feeds an add); the output of each Add, AddV2 or Mul with a quantized
  input (through identities, reshapes and max-pooling), or of the ReLU after it
  ('add_quant', 'mul_quant', 'act_quant'; in training dropout's multiplication too, as
  contrib's). The output of an AvgPool of a quantized tensor is rounded to its input's grid,
  as TensorFlow Lite's AVERAGE_POOL_2D keeps its input's scale (contrib left it float). The
  model's input is not quantized: TensorFlow Lite's converter takes its range
  (quantized_input_stats).
- quant_delay N > 0: before global step N the fake-quantized tensors are the float ones
  (the ranges still learn); from step N on, quantized. 0 or None: quantized from the start.

Variables: each range is '<scope>/<kind>/min' and '/max' (float32, global, not trainable,
not model variables: fine-tuning from a float checkpoint restores the model and starts the
ranges afresh): kind 'weights_quant' for a layer's weights (scalars, or [output channels]
with per_channel_wt; starting at [-6, 6], as contrib's), the kinds above for activations
(scalars starting at [0, 6]; in training also '/update_count', the batches the average
holds); '_1', '_2', ... follow a kind repeated in one scope (a separable convolution's two
weights). <scope> is the name scope of the layer (or add) without a leading clone scope
('clone_1/', model_deploy's), as contrib named them for one clone: the clones share one set,
as they share the weights, which the first clone (the first in the graph) updates, as
deploy() takes batch norm's updates from clone 0; the others quantize activations on what it
learns and weights on their own range (the same weights'). Checkpoints do not depend on the
number of clones, and the evaluation graph reads the same names. They sit on the device of
their layer's weights (an add's: of the layer feeding it), as the model's variables do: the
worker's CPU, a ps task, clone 0's device when replicated.

What differs from contrib: quant_delay and freeze_bn_delay count global steps (contrib
counted session runs in a variable of its own); per_channel_wt is symmetric and leaves
MatMul per tensor (NVIDIA's: asymmetric unless symmetric, MatMul per unit too); the ranges
are not model variables and are shared by the clones (contrib made a set per clone scope);
average pooling is quantized; a graph holding fake quantization already, or for the training
rewrite an optimizer's update, is refused (ValueError).
"""
import collections
import dataclasses
import re

import numpy as np
import tensorflow.compat.v1 as tf
from tensorflow.python.framework import tensor_util

__all__ = ['create_training_graph', 'create_eval_graph', 'experimental_create_training_graph',
           'experimental_create_eval_graph', 'checkpoint_per_channel_wt', 'EMA_DECAY']

EMA_DECAY = 0.999  # Of the activation ranges' moving averages, as contrib's.
# The ranges' starting values, as contrib's: what a range holds before its first update.
_ACTIVATIONS_INITIAL_RANGE = (0.0, 6.0)
_WEIGHTS_INITIAL_RANGE = (-6.0, 6.0)
_WEIGHTS_KIND = 'weights_quant'
# The name of a weight range's min variable, for checkpoint_per_channel_wt.
_WEIGHTS_MIN = re.compile(rf'(^|/){_WEIGHTS_KIND}(_\d+)?/min$')
_LAYER_TYPES = frozenset({'Conv2D', 'DepthwiseConv2dNative', 'MatMul'})
_ACTIVATION_TYPES = frozenset({'Relu', 'Relu6'})
_ADD_TYPES = frozenset({'Add', 'AddV2'})
_FUSED_BATCH_NORM_TYPES = frozenset({'FusedBatchNorm', 'FusedBatchNormV2', 'FusedBatchNormV3'})
_FAKE_QUANT_TYPES = frozenset({'FakeQuantWithMinMaxVars', 'FakeQuantWithMinMaxVarsPerChannel',
                               'FakeQuantWithMinMaxArgs'})
_VARIABLE_TYPES = frozenset({'VarHandleOp', 'VariableV2', 'Variable'})
_ASSIGN_TYPES = frozenset({'AssignSubVariableOp', 'AssignVariableOp', 'AssignSub', 'Assign'})
# Ops whose output holds the values of their first input: a quantized input stays quantized.
_PASS_THROUGH_TYPES = frozenset({'Identity', 'Reshape', 'Squeeze', 'MaxPool', 'Max',
                                 'BatchToSpaceND', 'SpaceToBatchND'})
# An op type starting so applies an optimizer's update: the training rewrite comes before.
_OPTIMIZER_UPDATE = re.compile(r'^(Resource)?(Sparse)?Apply')
_CLONE_SCOPE = re.compile(r'^clone_\d+/')  # model_deploy.DeploymentConfig.clone_scope's.


def create_training_graph(input_graph=None, quant_delay=0, per_channel_wt=False):
    """Rewrites a training graph in place for quantization-aware training (see the module).

    Call it after the model is built and before the gradients (optimizer.minimize,
    compute_gradients or deploy()'s optimize_clones): the fake quantization must be in the
    forward pass that backpropagation differentiates.

    Args:
      input_graph: the tf.Graph to rewrite; None: the default graph.
      quant_delay: the global step from which weights and activations are quantized (the
        float values before it, while the ranges learn); 0 or None: from the start.
      per_channel_wt: convolutions' weights per output channel, symmetric (for int8
        TensorFlow Lite models); False: per tensor, asymmetric, as contrib's (for uint8).
    Raises:
      ValueError: the graph holds an optimizer's update or fake quantization already.
    """
    experimental_create_training_graph(input_graph, quant_delay=quant_delay,
                                       per_channel_wt=per_channel_wt)


def create_eval_graph(input_graph=None, per_channel_wt=False):
    """Rewrites an evaluation graph in place to compute as the quantized model (see the
    module): batch norm folded with its moving statistics, weights and activations quantized
    on the ranges training learned (variables to restore from its checkpoint).

    Args:
      input_graph: the tf.Graph to rewrite; None: the default graph.
      per_channel_wt: as the training rewrite's (checkpoint_per_channel_wt tells).
    """
    experimental_create_eval_graph(input_graph, per_channel_wt=per_channel_wt)


def experimental_create_training_graph(input_graph=None, weight_bits=8, activation_bits=8,
                                       symmetric=False, quant_delay=0, freeze_bn_delay=None,
                                       scope=None, per_channel_wt=False):
    """create_training_graph with contrib's experimental options.

    Args:
      weight_bits, activation_bits: bits of the quantized weights and activations (2..16).
      symmetric: weight and activation ranges symmetric around 0.
      freeze_bn_delay: the global step from which folded batch norms use their moving
        statistics instead of the batch's, and stop updating them; None: never.
      scope: only the layers and adds whose names (clone scope removed) start with it.
    """
    _Rewrite(_graph(input_graph), True, weight_bits, activation_bits, symmetric, quant_delay,
             freeze_bn_delay, scope, per_channel_wt).run()


def experimental_create_eval_graph(input_graph=None, weight_bits=8, activation_bits=8,
                                   symmetric=False, quant_delay=None, scope=None,
                                   per_channel_wt=False):
    """create_eval_graph with contrib's experimental options (as the training rewrite's;
    quant_delay: quantized from this global step on, None: always)."""
    _Rewrite(_graph(input_graph), False, weight_bits, activation_bits, symmetric, quant_delay,
             None, scope, per_channel_wt).run()


def checkpoint_per_channel_wt(checkpoint):
    """The per_channel_wt of the training rewrite whose ranges checkpoint prefix `checkpoint`
    holds: True when it holds weight ranges per output channel, False when all are per
    tensor (tf.contrib.quantize's; also a model of fully connected layers only, whatever
    trained it), None when it holds none (it did not train quantization-aware)."""
    shapes = [shape for name, shape in tf.train.list_variables(checkpoint)
              if _WEIGHTS_MIN.search(name)]
    return any(len(shape) == 1 for shape in shapes) if shapes else None


def _graph(input_graph):
    return tf.get_default_graph() if input_graph is None else input_graph


def _check_step(name, value):
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or
                              value < 0):
        raise ValueError(f'{name} must be None or an integer >= 0 (a global step), '
                         f'got {value!r}')


def _check_bits(name, value):
    if isinstance(value, bool) or not isinstance(value, int) or not 2 <= value <= 16:
        raise ValueError(f'{name} must be an integer in [2, 16], got {value!r}')


def _split_clone_scope(scope):
    """(clone scope, the rest) of name scope `scope`: 'clone_1/LeNet/conv1' -> ('clone_1/',
    'LeNet/conv1'); ('', scope) outside the clones."""
    match = _CLONE_SCOPE.match(scope + '/')
    return (match.group(), scope[match.end():]) if match else ('', scope)


def _scope_of(name):
    """The name scope holding op `name`: 'LeNet/conv1/Conv2D' -> 'LeNet/conv1' ('' at the top)."""
    return name.rpartition('/')[0]


def _sole_consumer(tensor):
    """The one op consuming `tensor`, or None (none or several)."""
    consumers = tensor.consumers()
    return consumers[0] if len(consumers) == 1 else None


def _next_op(tensor):
    """The one op consuming `tensor`, looking through identities (such as the one holding a
    batch norm's in-place updates); None when there is none or several."""
    consumer = _sole_consumer(tensor)
    while consumer is not None and consumer.type == 'Identity':
        consumer = _sole_consumer(consumer.outputs[0])
    return consumer


def _other_input(op, tensor):
    """The input of two-input `op` that is not `tensor`; None when `tensor` is not one."""
    first, second = op.inputs
    return second if first is tensor else first if second is tensor else None


def _variable_op(tensor):
    """The variable op `tensor` reads (through reads and identities), or None. A variable made
    in parts (DeploymentConfig's variable_partitioner) is read as its parts' reads
    concatenated: its first part's."""
    op = tensor.op
    while op.type in ('Identity', 'ReadVariableOp'):
        op = op.inputs[0].op
    if op.type == 'ConcatV2':
        parts = [_variable_op(part) for part in op.inputs[:-1]]
        return parts[0] if None not in parts else None
    return op if op.type in _VARIABLE_TYPES else None


def _reroute(tensor, replacement, consumers):
    """Makes each op of `consumers` take `replacement` wherever it took `tensor`."""
    for op in consumers:
        for index, input_tensor in enumerate(op.inputs):
            if input_tensor is tensor:
                op._update_input(index, replacement)


def _copy_op(op, inputs, name):
    """A new op of `op`'s type and attributes on `inputs` (its first len(inputs) inputs);
    returns its first output."""
    arguments = dict(zip((arg.name for arg in op.op_def.input_arg), inputs))
    attributes = {attr.name: op.get_attr(attr.name) for attr in op.op_def.attr
                  if attr.name not in ('T', 'Tblock_shape', 'Tcrops')}
    return getattr(tf.raw_ops, op.type)(**arguments, **attributes, name=name)


@dataclasses.dataclass(frozen=True)
class _Layer:
    """A layer to quantize. op: its Conv2D, DepthwiseConv2dNative or MatMul; weights: the
    weights tensor it reads; variable: the weights' variable op (the first part's of a variable
    in parts); output: its output, after the BatchToSpaceND of an atrous convolution
    (`space_op`, else None)."""
    op: tf.Operation
    weights: tf.Tensor
    variable: tf.Operation
    output: tf.Tensor
    space_op: tf.Operation | None


@dataclasses.dataclass(frozen=True)
class _BatchNorm:
    """A batch norm of a layer's output, as the fold needs it.

    output: the tensor that holds the normalized output (its consumers get the folded one).
    gamma, beta: per-channel tensors, or None (scale, center off). epsilon: a float.
    mean, variance: the statistics it normalizes with: the moving ones (variable reads)
      in eval mode; in training mode None for a fused batch norm (the rewrite takes them),
      else the batch's (variance without Bessel's correction).
    updates: in training mode, [(op, input index, kind)]: where the moving-average updates
      read the batch statistics ('mean' or 'variance'; a fused kernel's variance has
      Bessel's correction); [] in eval mode.
    moving: in training mode {'mean': variable, 'variance': variable}; else {}.
    """
    output: tf.Tensor
    gamma: tf.Tensor | None
    beta: tf.Tensor | None
    epsilon: float
    mean: tf.Tensor | None
    variance: tf.Tensor | None
    updates: list
    moving: dict

    @property
    def training(self):
        return bool(self.moving)


class _Range:
    """The range of one quantized tensor: variables '<name>/min' and '<name>/max' of `shape`
    ([]: one range; [channels]: one per output channel) starting at `initial` (min, max), on
    `device`; `counted` (an activation's in training): also '<name>/update_count'."""

    def __init__(self, name, device, initial, shape=(), counted=False):
        self.device = device
        with tf.device(None), tf.device(device), tf.name_scope(None), \
                tf.name_scope(name + '/'):
            self.min, self.max = (self._variable(np.full(shape, value, np.float32), key)
                                  for key, value in zip(('min', 'max'), initial))
            self.count = self._variable(0.0, 'update_count') if counted else None

    @staticmethod
    def _variable(value, name):
        # Resource or not as the variable scope makes the model's (as contrib's).
        return tf.Variable(value, name=name, trainable=False,
                           collections=[tf.GraphKeys.GLOBAL_VARIABLES], dtype=tf.float32)

    def read(self):
        """(min, max) as they are."""
        with tf.colocate_with(self.min):
            return self.min.read_value(), self.max.read_value()

    def assign(self, low, high):
        """(min, max) after setting them to `low` and `high` (a last-value range)."""
        with tf.colocate_with(self.min):
            return self.min.assign(low), self.max.assign(high)

    def update(self, batch_min, batch_max):
        """(min, max) after averaging in a batch's range (scalars): each moves by
        (1 - EMA_DECAY) / (1 - EMA_DECAY^n) of its distance to the batch's, at its n-th
        update (a zero-debiased moving average: the first update sets it)."""
        with tf.colocate_with(self.min):
            count = self.count.assign_add(1.0)
            decay = tf.constant(EMA_DECAY)  # float32 in both terms: the first weight is 1.
            weight = (1.0 - decay) / (1.0 - tf.pow(decay, count))
            return (self.min.assign_sub(weight * (self.min.read_value() - batch_min)),
                    self.max.assign_sub(weight * (self.max.read_value() - batch_max)))


# An activation quantized: its _Range and the (min, max) tensors it was quantized with.
_Quantized = collections.namedtuple('_Quantized', ['range', 'min', 'max'])


class _Rewrite:
    """One rewrite of `graph`: finds the layers, folds, quantizes (see the module)."""

    def __init__(self, graph, training, weight_bits, activation_bits, symmetric, quant_delay,
                 freeze_bn_delay, scope, per_channel_wt):
        _check_bits('weight_bits', weight_bits)
        _check_bits('activation_bits', activation_bits)
        _check_step('quant_delay', quant_delay)
        _check_step('freeze_bn_delay', freeze_bn_delay)
        self._graph = graph
        self._training = training
        self._weight_bits, self._activation_bits = weight_bits, activation_bits
        self._symmetric, self._per_channel_wt = symmetric, per_channel_wt
        self._quant_delay, self._freeze_bn_delay = quant_delay or None, freeze_bn_delay
        self._scope = scope.strip('/') if scope else ''
        self._ranges = {}  # Range name -> _Range, made by its first (clone 0's) tensor.
        self._names = collections.Counter()  # (clone scope, range name) -> times used.
        self._quantized = {}  # Ref of an activation quantized here -> its _Quantized.
        self._steps = {}  # (step, device) -> bool tensor: global step >= step.
        self._variables = {  # Variable op -> tf.Variable, of the graph's global variables.
            v.op: v for v in graph.get_collection(tf.GraphKeys.GLOBAL_VARIABLES)}

    def run(self):
        """Quantizes each layer (graph order: clone 0's first), then the adds, multiplications
        and average pools after them; ValueError for a graph it must not rewrite."""
        graph = self._graph
        operations = graph.get_operations()
        faked = next((op for op in operations if op.type in _FAKE_QUANT_TYPES), None)
        if faked is not None:
            raise ValueError(f'the graph is quantized already (it holds {faked.type} '
                             f'{faked.name!r}): rewrite it once')
        update = next((op for op in operations if _OPTIMIZER_UPDATE.match(op.type)), None)
        if self._training and update is not None:
            raise ValueError(f'the training rewrite must come before the gradients, but the '
                             f'graph holds the optimizer update {update.name!r} ({update.type})')
        with graph.as_default(), graph.control_dependencies(None):
            if self._quant_delay is not None or self._freeze_bn_delay is not None:
                with tf.name_scope(None):  # On the caller's device, as contrib's.
                    tf.train.get_or_create_global_step(graph)
            for op in operations:
                layer = self._layer(op)
                if layer is not None:
                    self._quantize_layer(layer)
            for op in operations:
                if op.type in _ADD_TYPES | {'Mul'} and self._in_scope(op):
                    self._quantize_sum(op)
                elif op.type == 'AvgPool' and self._in_scope(op):
                    self._quantize_pool(op)

    def _in_scope(self, op):
        """Whether `op` is in the scope the rewrite is limited to (whole scopes)."""
        name = _split_clone_scope(op.name)[1]
        return not self._scope or name == self._scope or name.startswith(self._scope + '/')

    def _layer(self, op):
        """The _Layer of `op`, or None when it is none to quantize."""
        if (op.type not in _LAYER_TYPES or not self._in_scope(op) or
                op.outputs[0].dtype != tf.float32):
            return None
        if op.type == 'MatMul' and (op.get_attr('transpose_a') or op.get_attr('transpose_b')):
            return None
        weights = op.inputs[1]
        variable = _variable_op(weights)
        if variable is None:
            return None
        space_op = _sole_consumer(op.outputs[0])
        if space_op is None or space_op.type != 'BatchToSpaceND':
            space_op = None
        output = space_op.outputs[0] if space_op else op.outputs[0]
        return _Layer(op, weights, variable, output, space_op)

    def _quantize_layer(self, layer):
        """Folds the layer's batch norm, quantizes its weights and its output."""
        scope = _scope_of(layer.op.name)
        batch_norm = _batch_norm(layer.output, self._variables)
        with tf.device(None), tf.device(layer.op.device), tf.name_scope(None), \
                tf.name_scope(scope + '/'):
            if batch_norm is None:
                output = layer.output
                bias_add = _sole_consumer(output)
                if bias_add is not None and bias_add.type == 'BiasAdd':
                    output = bias_add.outputs[0]
                layer.op._update_input(1, self._quantized_weights(layer.weights, layer))
            else:
                output = self._fold(layer, batch_norm)
            consumer = _next_op(output)
            kind = 'act_quant'
            if consumer is not None and consumer.type in _ACTIVATION_TYPES:
                output = consumer.outputs[0]
            elif consumer is not None and consumer.type in _ADD_TYPES:
                kind = 'conv_quant'  # Before a residual add, as contrib names it.
            self._quantize_activation(output, scope, kind, layer.variable.device)

    def _quantized_weights(self, weights, layer):
        """`weights` of `layer` (its own or folded) fake-quantized in the narrow range, on its
        range '<layer scope>/weights_quant' (see the module); in the current name scope."""
        layer_op = layer.op
        per_channel = self._per_channel_wt and layer_op.type != 'MatMul'
        with tf.name_scope(_WEIGHTS_KIND):
            shaped = weights
            if per_channel and layer_op.type == 'DepthwiseConv2dNative':
                # Output channel = input channel x multiplier.
                shaped = tf.reshape(weights, weights.shape[:2].as_list() + [-1])
            quant_range, first = self._range(
                _scope_of(layer_op.name), _WEIGHTS_KIND, layer.variable.device,
                _WEIGHTS_INITIAL_RANGE, shaped.shape[-1:].as_list() if per_channel else [])
            if not self._training:
                low, high = quant_range.read()
            else:
                low, high = _weights_range(shaped, per_channel,
                                           self._symmetric or self._per_channel_wt)
                if first:
                    low, high = quant_range.assign(low, high)
            fake_quant = (tf.quantization.fake_quant_with_min_max_vars_per_channel
                          if per_channel else tf.quantization.fake_quant_with_min_max_vars)
            quantized = fake_quant(shaped, low, high, num_bits=self._weight_bits,
                                   narrow_range=True)
            if shaped is not weights:
                quantized = tf.reshape(quantized, weights.shape)
        return self._delayed(quantized, weights, layer_op.device)

    def _fold(self, layer, batch_norm):
        """Builds the folded layer of `batch_norm` (see the module), gives its consumers the
        result and returns it."""
        with tf.name_scope('BatchNorm_Fold'):
            channels = layer.output.shape[-1]
            gamma = batch_norm.gamma if batch_norm.gamma is not None else tf.ones([channels])
            beta = batch_norm.beta if batch_norm.beta is not None else tf.zeros([channels])
            epsilon = batch_norm.epsilon
            if batch_norm.training:
                moving_mean, moving_variance = (
                    _read(batch_norm.moving[kind]) for kind in ('mean', 'variance'))
                mean, variance = batch_norm.mean, batch_norm.variance
                if mean is None:  # Fused: the batch's statistics, differentiable.
                    mean, variance = tf.nn.moments(
                        layer.output, list(range(layer.output.shape.rank - 1)))
            else:
                moving_mean, moving_variance = batch_norm.mean, batch_norm.variance
            scale = gamma * tf.math.rsqrt(moving_variance + epsilon)
            weights_scale = scale
            if layer.op.type == 'DepthwiseConv2dNative':
                weights_scale = tf.reshape(scale, layer.weights.shape[2:])
            folded_weights = tf.multiply(layer.weights, weights_scale, name='mul_fold')
        quantized = self._quantized_weights(folded_weights, layer)
        output = _copy_op(layer.op, [layer.op.inputs[0], quantized], layer.op.type + '_Fold')
        if layer.space_op is not None:
            output = _copy_op(layer.space_op, [output, *layer.space_op.inputs[1:]],
                              'BatchToSpaceND_Fold')
        with tf.name_scope('BatchNorm_Fold'):
            moving_bias = beta - moving_mean * scale
            folded = tf.add(output, moving_bias, name='add_fold')
            if batch_norm.training:
                batch_scale = tf.math.rsqrt(variance + epsilon)
                correction = tf.math.sqrt(moving_variance + epsilon) * batch_scale
                batch_folded = tf.add(output * correction, beta - mean * gamma * batch_scale,
                                      name='batch_add_fold')
                frozen = (self._step_reached(self._freeze_bn_delay, layer.op.device)
                          if self._freeze_bn_delay is not None else None)
                if frozen is None:
                    folded = batch_folded
                else:
                    folded = tf.where_v2(frozen, folded, batch_folded)
                self._feed_updates(batch_norm, mean, variance, layer.output, frozen,
                                   moving_mean, moving_variance)
        _reroute(batch_norm.output, folded, batch_norm.output.consumers())
        return folded

    @staticmethod
    def _feed_updates(batch_norm, mean, variance, layer_output, frozen, moving_mean,
                      moving_variance):
        """Has the moving-average updates of training-mode `batch_norm` read `mean` and
        `variance` (biased: a fused kernel's updates get Bessel's correction, as it gave
        them), or, once `frozen` (a bool tensor; None: never), the moving statistics, which
        then stay as they are. A fused batch norm is then left unused."""
        fused = batch_norm.mean is None
        if not fused and frozen is None:
            return  # The updates read these, the batch norm's own statistics, already.
        if fused:
            count = tf.cast(tf.size(layer_output) // tf.size(mean), tf.float32)
            variance = variance * count / tf.maximum(count - 1.0, 1.0)
        values = {'mean': mean, 'variance': variance}
        if frozen is not None:
            values = {'mean': tf.where_v2(frozen, moving_mean, mean),
                      'variance': tf.where_v2(frozen, moving_variance, variance)}
        for op, index, kind in batch_norm.updates:
            op._update_input(index, values[kind])

    def _quantize_sum(self, op):
        """Quantizes the output of Add, AddV2 or Mul `op` (or of the ReLU after it) when one
        of its inputs is quantized."""
        sources = [self._source(tensor) for tensor in op.inputs]
        sources = [source for source in sources if source is not None]
        if not sources:
            return
        output, kind = op.outputs[0], ('mul_quant' if op.type == 'Mul' else 'add_quant')
        consumer = _sole_consumer(output)
        if consumer is not None and consumer.type in _ACTIVATION_TYPES:
            output, kind = consumer.outputs[0], 'act_quant'
        with tf.device(None), tf.device(op.device), tf.name_scope(None), \
                tf.name_scope(_scope_of(op.name) + '/'):
            self._quantize_activation(output, _scope_of(op.name), kind,
                                      sources[0].range.device)

    def _quantize_pool(self, op):
        """Rounds the output of AvgPool `op` to the grid of its quantized input, as TFLite's
        int8 AVERAGE_POOL_2D keeps its input's scale; nothing when the input is float."""
        source = self._source(op.inputs[0])
        if source is None:
            return
        output = op.outputs[0]
        consumers = output.consumers()
        with tf.device(None), tf.device(op.device), tf.name_scope(None), \
                tf.name_scope(op.name + '/'):
            quantized = self._delayed(tf.quantization.fake_quant_with_min_max_vars(
                output, source.min, source.max, num_bits=self._activation_bits), output,
                op.device)
        self._quantized[quantized.ref()] = source
        _reroute(output, quantized, consumers)

    def _source(self, tensor):
        """The _Quantized whose values `tensor` holds (through _PASS_THROUGH_TYPES ops), or
        None."""
        while tensor.ref() not in self._quantized and tensor.op.type in _PASS_THROUGH_TYPES:
            tensor = tensor.op.inputs[0]
        return self._quantized.get(tensor.ref())

    def _quantize_activation(self, tensor, scope, kind, device):
        """Gives the consumers of `tensor` (float32, made in name scope `scope`) its fake
        quantization on its range of `kind` (see _range; in training the first tensor of a
        range updates it, the others read it)."""
        consumers = tensor.consumers()
        with tf.name_scope(kind):
            quant_range, first = self._range(scope, kind, device, _ACTIVATIONS_INITIAL_RANGE,
                                             counted=self._training)
            low, high = (quant_range.update(*self._batch_range(tensor))
                         if first and self._training else quant_range.read())
            quantized = tf.quantization.fake_quant_with_min_max_vars(
                tensor, low, high, num_bits=self._activation_bits)
            quantized = self._delayed(quantized, tensor, tensor.op.device)
        self._quantized[quantized.ref()] = _Quantized(quant_range, low, high)
        _reroute(tensor, quantized, consumers)

    def _range(self, scope, kind, device, initial, shape=(), counted=False):
        """(the _Range '<scope, clone scope removed>/<kind>' of the next tensor of `kind` in
        name scope `scope`, whether this call made it). The first such tensor of a scope has
        '<kind>', the next '<kind>_1', ...: in each clone alike, so the first clone makes
        the range (on `device`, from `initial`, of `shape`; `counted`: see _Range) and the
        others share it."""
        clone_scope, model_scope = _split_clone_scope(scope)
        name = f'{model_scope}/{kind}'.lstrip('/')
        used = self._names[clone_scope, name]
        self._names[clone_scope, name] += 1
        if used:
            name = f'{name}_{used}'
        if name in self._ranges:
            return self._ranges[name], False
        self._ranges[name] = _Range(name, device, initial, shape, counted)
        return self._ranges[name], True

    def _batch_range(self, tensor):
        """(min, max) of `tensor`, widened to hold 0 (and, symmetric, to a range whose
        quantized zero is exact and midway: -2^(bits-1) to 2^(bits-1) - 1 steps)."""
        low = tf.minimum(tf.reduce_min(tensor), 0.0)
        high = tf.maximum(tf.reduce_max(tensor), 0.0)
        if not self._symmetric:
            return low, high
        levels = 2.0 ** (self._activation_bits - 1)
        ratio = (levels - 1.0) / levels  # max / -min of a symmetric range.
        return tf.minimum(low, -high / ratio), tf.maximum(high, -low * ratio)

    def _delayed(self, quantized, tensor, device):
        """`quantized` from global step quant_delay on, `tensor` before (no delay: quantized)."""
        if self._quant_delay is None:
            return quantized
        return tf.where_v2(self._step_reached(self._quant_delay, device), quantized, tensor,
                           name='delayed_quant')

    def _step_reached(self, step, device):
        """A bool scalar on `device`: whether the global step has reached `step`."""
        key = (step, device)
        if key not in self._steps:
            with tf.device(None), tf.device(device), tf.name_scope(None):
                self._steps[key] = tf.greater_equal(
                    tf.train.get_global_step(self._graph), step, name=f'step_reached_{step}')
        return self._steps[key]


def _weights_range(weights, per_channel, symmetric):
    """(min, max) of `weights` (per output channel, its last axis, when per_channel) as
    constants to backpropagation, widened to hold 0; `symmetric`: -max|w| and max|w|."""
    axes = list(range(weights.shape.rank - 1)) if per_channel else None
    if symmetric:
        limit = tf.reduce_max(tf.abs(weights), axes)
        low, high = -limit, limit
    else:
        low = tf.minimum(tf.reduce_min(weights, axes), 0.0)
        high = tf.maximum(tf.reduce_max(weights, axes), 0.0)
    return tf.stop_gradient(low), tf.stop_gradient(high)


def _read(variable):
    """A read of `variable`'s value, next to it."""
    with tf.colocate_with(variable):
        return variable.read_value()


def _batch_norm(layer_output, variables):
    """The _BatchNorm normalizing `layer_output` (NHWC, fused or not), or None.
    variables: {variable op: tf.Variable} of the graph's global variables."""
    return _fused_batch_norm(layer_output, variables) or _unfused_batch_norm(layer_output,
                                                                             variables)


def _fused_batch_norm(layer_output, variables):
    """A FusedBatchNorm* of `layer_output` (a MatMul's through a reshape to [-1, 1, 1, C] and
    back), as a _BatchNorm; None if there is none to fold."""
    bn_input, reshape = layer_output, _sole_consumer(layer_output)
    if reshape is not None and reshape.type == 'Reshape' and layer_output.shape.rank == 2:
        bn_input = reshape.outputs[0]
    bn = _sole_consumer(bn_input)
    if (bn is None or bn.type not in _FUSED_BATCH_NORM_TYPES or
            bn.get_attr('data_format') != b'NHWC'):
        return None
    output = bn.outputs[0]
    if bn_input is not layer_output:
        back = _sole_consumer(output)
        if back is None or back.type != 'Reshape':
            return None
        output = back.outputs[0]
    gamma, beta = bn.inputs[1], bn.inputs[2]
    epsilon = bn.get_attr('epsilon')
    if not bn.get_attr('is_training'):
        return _BatchNorm(output, gamma, beta, epsilon, bn.inputs[3], bn.inputs[4], [], {})
    if 'exponential_avg_factor' in bn.node_def.attr and bn.get_attr(
            'exponential_avg_factor') != 1.0:
        return None
    updates, moving = _updates({'mean': bn.outputs[1], 'variance': bn.outputs[2]}, variables)
    if moving is None:
        return None
    return _BatchNorm(output, gamma, beta, epsilon, None, None, updates, moving)


def _unfused_batch_norm(layer_output, variables):
    """tf.nn.batch_normalization of `layer_output`, as a _BatchNorm; None if there is none
    to fold. It computes x * inv + shift, inv = [gamma *] rsqrt(variance + epsilon),
    shift = beta - mean * inv (or -mean * inv without beta: (-mean) * inv)."""
    for mul in layer_output.consumers():
        if mul.type != 'Mul':
            continue
        inv = _other_input(mul, layer_output)
        add = _sole_consumer(mul.outputs[0])
        if inv is None or add is None or add.type not in _ADD_TYPES:
            continue
        gamma, rsqrt = None, inv.op
        if rsqrt.type == 'Mul':
            rsqrt, gamma = next(((t.op, _other_input(rsqrt, t)) for t in rsqrt.inputs
                                 if t.op.type == 'Rsqrt'), (None, None))
        shift = _other_input(add, mul.outputs[0])
        if rsqrt is None or rsqrt.type != 'Rsqrt' or shift is None:
            continue
        beta, product = shift.op.inputs if shift.op.type == 'Sub' else (None, shift)
        variance, epsilon = _sum_with_constant(rsqrt.inputs[0])
        if product.op.type != 'Mul' or variance is None:
            continue
        mean = _other_input(product.op, inv)
        if beta is None and mean is not None:
            mean = mean.op.inputs[0] if mean.op.type == 'Neg' else None
        if mean is None:
            continue
        if _variable_op(variance) is not None:  # Eval mode: the moving statistics.
            return _BatchNorm(add.outputs[0], gamma, beta, epsilon, mean, variance, [], {})
        updates, moving = _updates({'mean': mean, 'variance': variance}, variables)
        if moving is None:
            return None
        return _BatchNorm(add.outputs[0], gamma, beta, epsilon, mean, variance, updates,
                          moving)
    return None


def _sum_with_constant(tensor):
    """(x, c) when `tensor` is x + c for a scalar constant c, else (None, None)."""
    if tensor.op.type not in _ADD_TYPES:
        return None, None
    first, second = tensor.op.inputs
    for x, c in ((first, second), (second, first)):
        value = tensor_util.constant_value(c)
        if value is not None and value.size == 1:
            return x, float(value)
    return None, None


def _updates(statistics, variables):
    """Where the moving-average updates read batch `statistics` ({'mean': tensor,
    'variance': tensor}): ([(op, input index, kind)], {kind: tf.Variable updated}); (.., None)
    unless each statistic reaches an assignment of a global variable within 3 ops."""
    updates, moving = [], {}
    for kind, statistic in statistics.items():
        for consumer in statistic.consumers():
            variable = _assigned_variable(consumer, variables)
            if variable is not None:
                moving[kind] = variable
                updates += [(consumer, index, kind) for index, t in enumerate(consumer.inputs)
                            if t is statistic]
    return updates, (moving if len(moving) == len(statistics) else None)


def _assigned_variable(op, variables, depth=3):
    """The global variable an assignment within `depth` ops from `op` (through its
    consumers) writes, or None."""
    if op.type in _ASSIGN_TYPES:
        return variables.get(_variable_op(op.inputs[0]))
    if depth == 1:
        return None
    for tensor in op.outputs:
        for consumer in tensor.consumers():
            variable = _assigned_variable(consumer, variables, depth - 1)
            if variable is not None:
                return variable
    return None
