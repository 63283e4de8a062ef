"""TF-Slim's MobileNet framework: a net is a table of layers (`conv_defs`), built in order.

`conv_defs` is a dict:
  'spec': a list of `op(function, **params)` records, one per layer: slim.conv2d,
    conv_blocks.expanded_conv or any function (net, **params) -> net, and how the depth
    multiplier changes its params (`depth_multiplier`: their 'num_outputs');
  'defaults': {(function, ...): {argument: value}}, arg_scopes around the whole net;
  'overrides' (optional): the same, inside 'defaults'.
`mobilenet_base` builds the layers (end points 'layer_1', 'layer_2', ...); `mobilenet` tops
them with TF-Slim's classifier under 'Logits'. Nets build in inference mode unless
`training_scope()` (or is_training) says otherwise. mobilenet_v2 and mobilenet_v3 hold the
published tables.
"""
import collections
import contextlib
import functools

import tensorflow.compat.v1 as tf
import tf_slim as slim

import slim_deploy.common  # noqa: F401  (repairs tf-slim before it is used)
from slim_deploy.nets.mobilenet import conv_blocks


@slim.add_arg_scope
def apply_activation(x, name=None, activation_fn=None):
    """activation_fn(x, name=name), or x when activation_fn is None (arg_scope can set it)."""
    return activation_fn(x, name=name) if activation_fn else x


@slim.add_arg_scope
def depth_multiplier(output_params, multiplier, divisible_by=8, min_depth=8, **unused_kwargs):
    """The default multiplier_func of `op`: multiplies output_params['num_outputs'] (a
    layer's params dict, changed in place; nothing without that key) by `multiplier`,
    rounded to a multiple of `divisible_by`, at least `min_depth` (both settable by
    arg_scope)."""
    if 'num_outputs' in output_params:
        output_params['num_outputs'] = conv_blocks.make_divisible(
            output_params['num_outputs'] * multiplier, divisible_by, min_depth)


_Op = collections.namedtuple('Op', ['op', 'params', 'multiplier_func'])


def op(opfunc, multiplier_func=depth_multiplier, **params):
    """A layer of a conv_defs 'spec': opfunc(net, **params), its params first passed to
    multiplier_func(params, multiplier) (or to params' 'multiplier_transform', if given).
    Returns a namedtuple (op, params, multiplier_func)."""
    multiplier_func = params.pop('multiplier_transform', multiplier_func)
    return _Op(opfunc, params=params, multiplier_func=multiplier_func)


class NoOpScope(contextlib.nullcontext):
    """A context manager that does nothing (entering it gives None)."""


def safe_arg_scope(funcs, **kwargs):
    """slim.arg_scope(funcs, **kwargs) without the arguments that are None (which thus
    leave the current values alone); a NoOpScope when none is left."""
    kwargs = {name: value for name, value in kwargs.items() if value is not None}
    return slim.arg_scope(funcs, **kwargs) if kwargs else NoOpScope()


@contextlib.contextmanager
def _arg_scopes(defaults):
    """Enters one slim.arg_scope per item of `defaults` ({functions: {argument: value}} or
    a list of such pairs), in order."""
    with contextlib.ExitStack() as stack:
        for funcs, arguments in (defaults.items() if hasattr(defaults, 'items') else defaults):
            stack.enter_context(slim.arg_scope(funcs, **arguments))
        yield


@contextlib.contextmanager
def _variable_and_name_scope(scope, default_name):
    """Enters variable scope `scope` (None: a new `default_name` one) and its name scope."""
    with tf.variable_scope(scope, default_name=default_name) as var_scope, \
            tf.name_scope(var_scope.original_name_scope):
        yield var_scope


@slim.add_arg_scope
def mobilenet_base(inputs, conv_defs, multiplier=1.0, final_endpoint=None, output_stride=None,
                   use_explicit_padding=False, scope=None, is_training=False):
    """Builds the layers of `conv_defs` on `inputs` [batch, height, width, channels], in
    variable scope `scope` (None: 'Mobilenet', 'Mobilenet_1', ...).

    multiplier: passed to every layer's multiplier_func (> 0): the depth multiplier.
    final_endpoint: the last layer to build, 'layer_<i>' (None: all).
    output_stride: the largest input / output size ratio (None: the layers' strides):
      None, 1 or an even number; once it is reached, the strides of later layers dilate
      their (but 1x1) convolutions instead.
    use_explicit_padding: pad explicitly and convolve with 'VALID' padding.
    is_training: batch normalization's mode (None: the arg_scope's; training_scope()
      sets it, as does passing it).
    Returns (net, end_points): end_points maps 'layer_<i>' to each layer's output and
    'layer_<i>/<name>' to its ops whose names end with 'output' ('layer_3/output',
    'layer_3/expansion_output', 'layer_3/depthwise_output', ...).
    Raises ValueError for multiplier <= 0 or an odd output_stride above 1.
    """
    if multiplier <= 0:
        raise ValueError(f'multiplier must be greater than zero, got {multiplier!r}')
    if output_stride is not None and (output_stride == 0
                                      or output_stride > 1 and output_stride % 2):
        raise ValueError(f'output_stride must be None, 1 or a multiple of 2, got '
                         f'{output_stride!r}')
    overrides = dict(conv_defs.get('overrides', {}))
    if use_explicit_padding:
        overrides[(slim.conv2d, slim.separable_conv2d)] = {'padding': 'VALID'}
    with _variable_and_name_scope(scope, 'Mobilenet'), \
            safe_arg_scope([slim.batch_norm], is_training=is_training), \
            _arg_scopes(conv_defs.get('defaults', {})), _arg_scopes(overrides):
        net, end_points, layer_of_scope = inputs, {}, {}
        stride_so_far, rate = 1, 1  # The output stride so far; the dilation once reached.
        for index, layer in enumerate(conv_defs['spec'], start=1):
            params = dict(layer.params)
            layer.multiplier_func(params, multiplier)
            stride = params.get('stride', 1)
            layer_rate = 1
            if output_stride is not None and stride_so_far == output_stride:
                params['stride'], layer_rate, rate = 1, rate, rate * stride
            else:
                params['stride'] = stride
                stride_so_far *= stride
            if layer_rate > 1 and tuple(params.get('kernel_size', [])) != (1, 1):
                params['rate'] = layer_rate
            if use_explicit_padding:
                if 'kernel_size' in params:
                    net = conv_blocks.fixed_padding(net, params['kernel_size'], layer_rate)
                else:
                    params['use_explicit_padding'] = True
            name = f'layer_{index}'
            try:
                net = end_points[name] = layer.op(net, **params)
            except Exception as error:
                error.add_note(f'while building {name}: {layer.op!r} with {params!r}')
                raise
            layer_of_scope[net.op.name.rpartition('/')[0]] = name
            if name == final_endpoint:
                break
        for operation in net.graph.get_operations():
            op_scope, _, op_name = operation.name.rpartition('/')
            if op_scope in layer_of_scope and op_name.endswith('output'):
                end_points[f'{layer_of_scope[op_scope]}/{op_name}'] = operation.outputs[0]
        return net, end_points


@slim.add_arg_scope
def mobilenet(inputs, num_classes=1001, prediction_fn=slim.softmax, reuse=None,
              scope='Mobilenet', base_only=False, use_reduce_mean_for_pooling=False,
              **mobilenet_args):
    """Builds a MobileNet classifier on `inputs` [batch, height, width, channels]:
    mobilenet_base (given **mobilenet_args: conv_defs, multiplier, final_endpoint,
    output_stride, use_explicit_padding, is_training) in variable scope `scope`, then
    'Logits': global pooling, dropout (training only) and a 1x1 convolution with biases,
    'Logits/Conv2d_1c_1x1'.

    num_classes: the logits' width; 0 or None builds no classifier and returns the pooled
      features [batch, 1, 1, depth] (before dropout).
    prediction_fn: (logits, scope) -> end point 'Predictions' (None: none).
    reuse: reuse the variables of `scope`.
    base_only: return mobilenet_base's (net, end_points), before any pooling.
    use_reduce_mean_for_pooling: pool by reduce_mean rather than average pooling.
    Returns (net, end_points): net is the logits [batch, num_classes] (or the features);
    end_points has mobilenet_base's, 'global_pool', 'Logits' and 'Predictions'.
    Raises ValueError for inputs of a rank other than 4.
    """
    is_training = mobilenet_args.get('is_training', False)
    rank = len(inputs.shape.as_list())
    if rank != 4:
        raise ValueError(f'Expected rank 4 input, was: {rank}')
    with tf.variable_scope(scope, 'Mobilenet', reuse=reuse) as var_scope:
        inputs = tf.identity(inputs, 'input')
        net, end_points = mobilenet_base(inputs, scope=var_scope, **mobilenet_args)
        if base_only:
            return net, end_points
        net = tf.identity(net, name='embedding')
        with tf.variable_scope('Logits'):
            net = end_points['global_pool'] = global_pool(net, use_reduce_mean_for_pooling)
            if not num_classes:
                return net, end_points
            net = slim.dropout(net, scope='Dropout', is_training=is_training)
            logits = slim.conv2d(net, num_classes, [1, 1], activation_fn=None,
                                 normalizer_fn=None, biases_initializer=tf.zeros_initializer(),
                                 scope='Conv2d_1c_1x1')
            logits = tf.identity(tf.squeeze(logits, [1, 2]), name='output')
        end_points['Logits'] = logits
        if prediction_fn:
            end_points['Predictions'] = prediction_fn(logits, 'Predictions')
    return logits, end_points


def global_pool(input_tensor, use_reduce_mean_for_pooling=False, pool_op=tf.nn.avg_pool2d):
    """Averages `input_tensor` [batch, height, width, depth] to [batch, 1, 1, depth]: by
    `pool_op` (ksize=, strides=, padding=) over the whole map, or by reduce_mean when
    use_reduce_mean_for_pooling or when the graph does not know the map's size (TF 2's
    pooling takes no window size computed at run time)."""
    height, width = input_tensor.shape.as_list()[1:3]
    if use_reduce_mean_for_pooling or height is None or width is None:
        return tf.reduce_mean(input_tensor, [1, 2], keepdims=True, name='ReduceMean')
    return pool_op(input_tensor, ksize=[1, height, width, 1], strides=[1, 1, 1, 1],
                   padding='VALID')


def training_scope(is_training=True, weight_decay=0.00004, stddev=0.09,
                   dropout_keep_prob=0.8, bn_decay=0.997):
    """Returns the arg_scope TF-Slim trains MobileNets in (use is_training=False for
    evaluation): batch normalization after every convolution with moving averages of decay
    `bn_decay`, weights drawn from a truncated normal of `stddev` (negative: Xavier's), an
    L2 penalty of `weight_decay` on every regular convolution's weights (none on the
    depthwise ones), dropout keeping `dropout_keep_prob`. None for is_training,
    dropout_keep_prob or bn_decay leaves that setting alone."""
    if stddev < 0:
        initializer = slim.initializers.xavier_initializer()
    else:
        initializer = tf.truncated_normal_initializer(stddev=stddev)
    with slim.arg_scope([slim.conv2d, slim.fully_connected, slim.separable_conv2d],
                        weights_initializer=initializer, normalizer_fn=slim.batch_norm), \
            slim.arg_scope([mobilenet_base, mobilenet], is_training=is_training), \
            safe_arg_scope([slim.batch_norm], decay=bn_decay, is_training=is_training), \
            safe_arg_scope([slim.dropout], is_training=is_training,
                           keep_prob=dropout_keep_prob), \
            slim.arg_scope([slim.conv2d], weights_regularizer=slim.l2_regularizer(weight_decay)), \
            slim.arg_scope([slim.separable_conv2d], weights_regularizer=None) as scope:
        return scope


def wrapped_partial(func, *args, **kwargs):
    """functools.partial(func, *args, **kwargs) that keeps func's name, docstring and
    attributes (default_image_size)."""
    return functools.update_wrapper(functools.partial(func, *args, **kwargs), func)
