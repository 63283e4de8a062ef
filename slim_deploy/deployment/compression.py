"""16-bit gradient exchange: gradients cross between tasks in bfloat16 or float16 and are
applied in float32.

bfloat16 keeps float32's exponent range, so a gradient is rounded to 8 significant bits
and nothing else. float16 has 11 significant bits but overflows above 65504 and flushes
values below 2^-24 to zero, where small gradients live; each tensor is therefore sent
times a power of two, chosen from its largest magnitude so that the largest element, or
a sum of `count` such elements, stays within 2^15, and divided by it again when widened.
A power of two changes the exponent only: the scaling itself adds no rounding. Elements
smaller than 2^-24 of the largest still flush to zero. A tensor holding an Inf or NaN
stays non-finite, so that float16 loss scaling still skips its update.
"""
import math

import tensorflow.compat.v1 as tf

from slim_deploy.common.registry import Registry

# --gradient_compression: the dtype gradients cross the network in (None: float32, as
# computed).
COMPRESSIONS = Registry('gradient_compression', {
    'none': None, 'bfloat16': tf.bfloat16, 'float16': tf.float16})
_FLOAT16_LIMIT = 2.0 ** 15  # What a scaled float16 sum may reach: half of 65504, rounded.
_MAX_EXPONENT = 100  # Scales stay within 2^±100, inside float32's range.


def wire_dtype(compression):
    """The dtype of `compression` (a name in COMPRESSIONS), or None for 'none'."""
    return COMPRESSIONS[compression]


def round_off(compression):
    """The relative error of one rounding to `compression`'s dtype (a name in
    COMPRESSIONS): 2^-8 for bfloat16, 2^-11 for float16, 0 for 'none'."""
    return {'none': 0.0, 'bfloat16': 2.0 ** -8, 'float16': 2.0 ** -11}[
        COMPRESSIONS.check(compression)]


def needs_scale(dtype):
    """Whether tensors sent as `dtype` (None: float32) are scaled first (float16 only)."""
    return dtype == tf.float16


def scale_for(max_abs, count=1):
    """The power of two (float32 scalar) that float16 tensors whose largest magnitude is
    `max_abs` (float32 scalar, over all of them) are multiplied by, so that a sum of `count`
    of them stays within 2^15."""
    exponent = tf.floor(tf.math.log(_FLOAT16_LIMIT / (count * max_abs)) / math.log(2.0))
    return tf.pow(2.0, tf.clip_by_value(exponent, -_MAX_EXPONENT, _MAX_EXPONENT))


def max_abs(tensor):
    """The largest magnitude in `tensor` (float32 scalar); NaN if it holds a NaN."""
    values = tf.reshape(tf.abs(tensor), [-1])
    nan = tf.reduce_any(tf.math.is_nan(values))
    return tf.where(nan, tf.constant(math.nan), tf.reduce_max(values))


def narrowed(tensor, dtype, scale=None):
    """`tensor` (float32) times `scale` (None: 1) in `dtype`."""
    return tf.cast(tensor if scale is None else tensor * scale, dtype)


def widened(tensor, scale=None):
    """The float32 value of a narrowed() tensor, divided by its `scale` (None: 1)."""
    tensor = tf.cast(tensor, tf.float32)
    return tensor if scale is None else tensor / scale


@tf.RegisterGradient('SlimDeployPassThrough')
def _pass_through(unused_op, grad):
    """The gradient of a cast that only carries a value across the network: the incoming
    gradient, in its own dtype (float32), not rounded to the cast's."""
    return grad


def read_across(read, dtype, device):
    """`read` (a float32 read of a variable, on the variable's device) sent to `device` (a
    device string or function) in `dtype`: narrowed with the read (colocated: it follows the
    variable wherever that goes), widened to float32 on `device`. Gradients flow back to the
    read unchanged, in float32."""
    graph = tf.get_default_graph()
    with graph.gradient_override_map({'Cast': 'SlimDeployPassThrough'}), \
            tf.colocate_with(None, ignore_existing=True):
        with tf.colocate_with(read.op):
            narrow = tf.cast(read, dtype)
        with tf.device(device):
            return tf.cast(narrow, tf.float32)


def across_tasks(grads_and_vars, dtype, device):
    """[(gradient, variable)] whose gradients reach their variable's device in `dtype` (None:
    as they are): each is narrowed on `device` (the worker's, where they were summed) and
    widened with the variable (colocated, on its ps task), where the update reads it; with
    float16 scaled by a power of two (scale_for), which goes along as a float32 scalar.
    Gradients of variables on no task or on `device`'s are left alone, as are those of other
    dtypes than float32. IndexedSlices keep their indices; their values are sent."""
    if dtype is None:
        return list(grads_and_vars)
    here = tf.DeviceSpec.from_string(device)
    result = []
    for grad, var in grads_and_vars:
        there = tf.DeviceSpec.from_string(var.device)
        if (grad is None or grad.dtype != tf.float32 or not there.job or
                (there.job, there.task) == (here.job, here.task)):
            result.append((grad, var))
            continue
        values = grad.values if isinstance(grad, tf.IndexedSlices) else grad
        with tf.device(device):
            scale = scale_for(max_abs(values)) if needs_scale(dtype) else None
            sent = narrowed(values, dtype, scale)
        with tf.colocate_with(var):
            received = widened(sent, scale)
        if isinstance(grad, tf.IndexedSlices):
            received = tf.IndexedSlices(received, grad.indices, grad.dense_shape)
        result.append((received, var))
    return result
