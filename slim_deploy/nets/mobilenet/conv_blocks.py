"""TF-Slim's MobileNet building blocks: the inverted residual bottleneck `expanded_conv`
(MobileNet v2, v3, EdgeTPU), MobileNet v1's `split_separable_conv2d`, `split_conv` and
the `squeeze_excite` gate of MobileNet v3.

Each block names its variables as TF-Slim's checkpoints do: under 'expanded_conv',
'expanded_conv_1', ... (or its `scope`) the 1x1 'expand', the 'depthwise' and the 1x1
'project' convolutions, and 'squeeze_excite/Conv' and 'squeeze_excite/Conv_1'. All
tensors are float32 [batch, height, width, depth].
"""
import contextlib
import functools

import tensorflow.compat.v1 as tf
import tf_slim as slim

import slim_deploy.common  # noqa: F401  (repairs tf-slim before it is used)

_DEPTHWISE_LOCATIONS = (None, 'input', 'output', 'expansion')


def make_divisible(value, divisor, min_value=None):
    """`value` (a depth) rounded to the nearest multiple of `divisor`, at least `min_value`
    (None: `divisor`), one multiple higher where rounding would lose over 10%."""
    min_value = divisor if min_value is None else min_value
    rounded = max(min_value, int(value + divisor / 2) // divisor * divisor)
    return int(rounded + divisor if rounded < 0.9 * value else rounded)


def fixed_padding(inputs, kernel_size, rate=1):
    """Zero-pads `inputs` [batch, height, width, depth] so that a convolution of
    `kernel_size` ([height, width]) dilated by `rate` with 'VALID' padding gives the shape
    'SAME' padding would, whatever the input's size."""
    pads = []
    for kernel in kernel_size[:2]:
        total = (kernel - 1) * rate  # The dilated kernel's size less one.
        pads.append([total // 2, total - total // 2])
    return tf.pad(inputs, [[0, 0], *pads, [0, 0]])


def _split_divisible(num, num_ways, divisible_by=8):
    """Splits `num` (a multiple of `divisible_by`, at least num_ways times it) into
    `num_ways` multiples of `divisible_by` as even as can be, the larger ones last."""
    assert num % divisible_by == 0 and num / num_ways >= divisible_by, (num, num_ways)
    part = num // num_ways // divisible_by * divisible_by
    parts, total = [], 0
    for way in range(1, num_ways + 1):
        size = part
        while total + size < num * way / num_ways:
            size += divisible_by
        parts.append(size)
        total += size
    return parts


@contextlib.contextmanager
def _separable_scope_prefix(scope):
    """Yields the prefix of a separable convolution's two scopes: `scope` + '_' (TF-Slim's
    'Conv2d_1_depthwise', 'Conv2d_1_pointwise'), or '' inside a new unique scope
    'separable', 'separable_1', ... when `scope` is None."""
    if scope is not None:
        yield scope + '_'
        return
    with tf.variable_scope(None, default_name='separable') as var_scope, \
            tf.name_scope(var_scope.original_name_scope):
        yield ''


@slim.add_arg_scope
def split_separable_conv2d(input_tensor, num_outputs, scope=None, normalizer_fn=None,
                           stride=1, rate=1, endpoints=None, use_explicit_padding=False):
    """MobileNet v1's separable convolution: a 3x3 depthwise convolution ('<scope>_depthwise')
    and a 1x1 one to `num_outputs` channels ('<scope>_pointwise'), each normalized by
    `normalizer_fn` and activated (by the arg_scope's activation_fn).

    rate: the depthwise convolution's dilation. endpoints: a dict (None: none) that gets
    both outputs under their scope names. use_explicit_padding: pad the input explicitly
    and convolve with 'VALID' padding (same shapes as 'SAME').
    Returns the [batch, height / stride, width / stride, num_outputs] output.
    """
    kernel_size, padding = [3, 3], 'SAME'
    endpoints = {} if endpoints is None else endpoints
    with _separable_scope_prefix(scope) as prefix:
        if use_explicit_padding:
            input_tensor, padding = fixed_padding(input_tensor, kernel_size, rate), 'VALID'
        net = endpoints[prefix + 'depthwise'] = slim.separable_conv2d(
            input_tensor, None, kernel_size, depth_multiplier=1, stride=stride, rate=rate,
            normalizer_fn=normalizer_fn, padding=padding, scope=prefix + 'depthwise')
        net = endpoints[prefix + 'pointwise'] = slim.conv2d(
            net, num_outputs, [1, 1], stride=1, normalizer_fn=normalizer_fn,
            scope=prefix + 'pointwise')
    return net


def expand_input_by_factor(n, divisible_by=8):
    """An `expansion_size` for expanded_conv: (num_inputs=depth, **ignored) -> `n` times the
    input depth, rounded by make_divisible to a multiple of `divisible_by`."""
    return lambda num_inputs, **_: make_divisible(num_inputs * n, divisible_by)


def split_conv(input_tensor, num_outputs, num_ways, scope, divisible_by=8, **kwargs):
    """A 1x1 convolution to `num_outputs` channels (variable scope `scope`), split into
    `num_ways` independent convolutions ('<scope>_part_0', ...) of slices of the input
    depth, concatenated; unsplit when num_ways is 1 or a part would get fewer than
    `divisible_by` input or output channels. kwargs go to slim.conv2d."""
    depth = input_tensor.shape.as_list()[3]
    if num_ways == 1 or min(depth // num_ways, num_outputs // num_ways) < divisible_by:
        return slim.conv2d(input_tensor, num_outputs, [1, 1], scope=scope, **kwargs)
    inputs = tf.split(input_tensor, _split_divisible(depth, num_ways, divisible_by), axis=3,
                      name='split_' + scope)
    outputs = _split_divisible(num_outputs, num_ways, divisible_by)
    parts = []
    for index, (part_input, part_outputs) in enumerate(zip(inputs, outputs)):
        part_scope = f'{scope}_part_{index}'
        part = slim.conv2d(part_input, part_outputs, [1, 1], scope=part_scope, **kwargs)
        parts.append(tf.identity(part, part_scope + '_output'))
    return tf.concat(parts, 3, name=part_scope + '_concat')


@slim.add_arg_scope
def expanded_conv(input_tensor, num_outputs, expansion_size=expand_input_by_factor(6),
                  stride=1, rate=1, kernel_size=(3, 3), residual=True, normalizer_fn=None,
                  split_projection=1, split_expansion=1, split_divisible_by=8,
                  expansion_transform=None, depthwise_location='expansion',
                  depthwise_channel_multiplier=1, endpoints=None, use_explicit_padding=False,
                  padding='SAME', inner_activation_fn=None, depthwise_activation_fn=None,
                  project_activation_fn=tf.identity, depthwise_fn=slim.separable_conv2d,
                  expansion_fn=split_conv, projection_fn=split_conv, scope=None):
    """The inverted residual bottleneck: a 1x1 'expand' convolution to `expansion_size`
    channels (skipped unless that widens the input), a `kernel_size` 'depthwise'
    convolution, a 1x1 linear 'project' convolution to `num_outputs` channels and, when
    shapes allow, the input added back. Variable scope `scope` (None: 'expanded_conv',
    'expanded_conv_1', ...); the block's ops 'input', 'expansion_output',
    'depthwise_output' and 'output' are identities of those tensors.

    expansion_size: a depth, or a callable (num_inputs=input depth) -> depth.
    stride, rate, kernel_size: the depthwise convolution's.
    residual: add the input when stride is 1 and the depths match; or a callable
      (input_tensor=, output_tensor=) -> output.
    normalizer_fn: of every convolution (None: none, even if arg_scope sets one).
    split_projection, split_expansion, split_divisible_by: split_conv's num_ways and
      divisible_by for the projection and the expansion (when they are split_conv).
    expansion_transform: callable (expansion_tensor=, input_tensor=) -> tensor applied
      after the depthwise convolution (MobileNet v3's squeeze-excite).
    depthwise_location: where the depthwise convolution is: 'expansion' (after it),
      'input' (before it), 'output' (after the projection), None (nowhere); outside the
      expansion it is linear.
    depthwise_channel_multiplier: depthwise filters per input channel.
    endpoints: a dict (None: none) that gets 'depthwise_output', 'expansion_output' and
      'projection_output' where they exist.
    use_explicit_padding: pad explicitly and convolve with 'VALID' (only with 'SAME'
      `padding`, the depthwise convolution's otherwise).
    inner_activation_fn: activation of the expansion and depthwise convolutions;
      depthwise_activation_fn: of the depthwise one (both None: the arg_scope's);
      project_activation_fn: of the projection.
    depthwise_fn, expansion_fn, projection_fn: the functions building the convolutions,
      called as slim.separable_conv2d and split_conv are.
    Returns the output [batch, height / stride, width / stride, num_outputs].
    Raises TypeError for an unknown depthwise_location, or explicit padding with
    `padding` other than 'SAME'.
    """
    if depthwise_location not in _DEPTHWISE_LOCATIONS:
        raise TypeError(f'{depthwise_location!r} is unknown value for depthwise_location')
    if use_explicit_padding:
        if padding != 'SAME':
            raise TypeError('`use_explicit_padding` should only be used with "SAME" padding.')
        padding = 'VALID'
    conv_args = {} if inner_activation_fn is None else {'activation_fn': inner_activation_fn}
    depthwise_args = dict(conv_args)
    if depthwise_activation_fn is not None:
        depthwise_args['activation_fn'] = depthwise_activation_fn
    endpoints = {} if endpoints is None else endpoints

    def depthwise(net, **activation):
        if use_explicit_padding:
            net = fixed_padding(net, kernel_size, rate)
        net = depthwise_fn(net, num_outputs=None, kernel_size=kernel_size,
                           depth_multiplier=depthwise_channel_multiplier, stride=stride,
                           rate=rate, normalizer_fn=normalizer_fn, padding=padding,
                           scope='depthwise', **activation)
        net = endpoints['depthwise_output'] = tf.identity(net, name='depthwise_output')
        return net

    def split(conv_fn, num_ways):
        if conv_fn is not split_conv:
            return conv_fn
        return functools.partial(split_conv, num_ways=num_ways, divisible_by=split_divisible_by,
                                 stride=1)

    with tf.variable_scope(scope, default_name='expanded_conv') as var_scope, \
            tf.name_scope(var_scope.original_name_scope), \
            slim.arg_scope([slim.conv2d], **conv_args), \
            slim.arg_scope([slim.separable_conv2d], **depthwise_args):
        input_depth = input_tensor.shape.as_list()[3]
        input_tensor = net = tf.identity(input_tensor, 'input')
        if depthwise_location == 'input':
            net = depthwise(net, activation_fn=None)
        inner_size = (expansion_size(num_inputs=input_depth) if callable(expansion_size)
                      else expansion_size)
        if inner_size > net.shape[3]:
            net = split(expansion_fn, split_expansion)(net, inner_size, scope='expand',
                                                       normalizer_fn=normalizer_fn)
            net = endpoints['expansion_output'] = tf.identity(net, 'expansion_output')
        if depthwise_location == 'expansion':
            net = depthwise(net)
        if expansion_transform:
            net = expansion_transform(expansion_tensor=net, input_tensor=input_tensor)
        net = endpoints['projection_output'] = split(projection_fn, split_projection)(
            net, num_outputs, scope='project', normalizer_fn=normalizer_fn,
            activation_fn=project_activation_fn)
        if depthwise_location == 'output':
            net = depthwise(net, activation_fn=None)
        if callable(residual):
            net = residual(input_tensor=input_tensor, output_tensor=net)
        elif residual and stride == 1 and net.shape[3] == input_tensor.shape[3]:
            net += input_tensor
        return tf.identity(net, name='output')


@slim.add_arg_scope
def squeeze_excite(input_tensor, divisible_by=8, squeeze_factor=3,
                   inner_activation_fn=tf.nn.relu, gating_fn=tf.sigmoid,
                   squeeze_input_tensor=None, pool=None):
    """Gates each channel of `input_tensor` by gating_fn of two 1x1 convolutions with
    biases ('squeeze_excite/Conv', to the pooled depth / `squeeze_factor` rounded to a
    multiple of `divisible_by`, then `inner_activation_fn`; 'squeeze_excite/Conv_1', back
    to input_tensor's depth) of `squeeze_input_tensor` (None: input_tensor) averaged over
    the whole map, or over `pool` x `pool` windows (stride `pool`, the gate then resized
    bilinearly to the input's size) when `pool` is given and fits.
    Returns input_tensor * gate, input_tensor's shape."""
    with tf.variable_scope('squeeze_excite'):
        squeeze_input = input_tensor if squeeze_input_tensor is None else squeeze_input_tensor
        _, height, width, channels = squeeze_input.shape.as_list()
        if pool is None:
            pooled = tf.reduce_mean(squeeze_input, axis=[1, 2], keepdims=True)
        else:
            window, stride = ((pool, pool), pool) if height >= pool else ((height, width), 1)
            pooled = tf.nn.avg_pool(squeeze_input, (1, *window, 1),
                                    strides=(1, stride, stride, 1), padding='VALID')
        squeeze = slim.conv2d(pooled, kernel_size=(1, 1), normalizer_fn=None,
                              num_outputs=make_divisible(channels / squeeze_factor, divisible_by),
                              activation_fn=inner_activation_fn)
        gate = slim.conv2d(squeeze, num_outputs=input_tensor.shape.as_list()[3],
                           kernel_size=[1, 1], normalizer_fn=None, activation_fn=gating_fn)
        if pool is not None:
            gate = tf.image.resize_images(gate, input_tensor.shape.as_list()[1:3],
                                          align_corners=True)
        return input_tensor * gate
