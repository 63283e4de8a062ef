"""Mixed precision: the session rewrite behind each precision, and dynamic loss scaling.

bfloat16 and float16 keep the graph as built, in float32; TensorFlow's auto-mixed-precision
graph rewrite, turned on in the session config, runs the heavy ops (convolutions, matmuls
and the element-wise ops between them) in the narrow type and casts at their edges.
Variables, losses (the cross-entropy is never rewritten), batch-norm statistics, gradient
sums, all-reduces and optimizer updates stay float32, so checkpoints are float32 and any
precision resumes from any other's. Each rewrite converts the ops of one kind of device:
bfloat16's (oneDNN) those on CPUs, float16's (CUDA) those on GPUs; elsewhere the step runs
in float32. float16's narrow range needs dynamic loss scaling (DynamicLossScale).
"""
import dataclasses

import tensorflow.compat.v1 as tf
from tensorflow.core.protobuf import rewriter_config_pb2

from slim_deploy.common.registry import Registry

# A graph collection holding the DynamicLossScale's scale and skipped-update count.
LOSS_SCALE = 'loss_scale'


@dataclasses.dataclass(frozen=True)
class Precision:
    """rewrite: the RewriterConfig field of the graph rewrite (None: none); device_type:
    the devices whose ops it converts ('CPU', 'GPU'; None: none); loss_scaling: whether the
    gradients need dynamic loss scaling; rewrite_cpu_flags: /proc/cpuinfo flags, one of which
    TensorFlow needs to rewrite CPU ops at all (empty: none); cpu_flags: those, one of which
    makes the CPU run the rewritten ops fast (empty: no CPU does); remote_fusion: whether the
    graph optimizer may
    fuse ops in sessions through a gRPC server (on TensorFlow 2.21 it fuses a bfloat16
    convolution, bias and activation there into an op with no bfloat16 CPU kernel)."""
    rewrite: str | None = None
    device_type: str | None = None
    loss_scaling: bool = False
    rewrite_cpu_flags: tuple[str, ...] = ()
    cpu_flags: tuple[str, ...] = ()
    remote_fusion: bool = True


PRECISIONS = Registry('precision', {
    'float32': Precision(),
    # TensorFlow rewrites to bfloat16 only where oneDNN runs it (IsBF16SupportedByOneDNN-
    # OnThisCPU: AVX512F or AVX-NE-CONVERT), natively with AVX512_BF16 or AMX_BF16.
    'bfloat16': Precision('auto_mixed_precision_onednn_bfloat16', 'CPU',
                          rewrite_cpu_flags=('avx512f', 'avx_ne_convert'),
                          cpu_flags=('avx512_bf16', 'amx_bf16'), remote_fusion=False),
    'float16': Precision('auto_mixed_precision', 'GPU', loss_scaling=True),
})


def configure(session_config, precision, remote=False):
    """Turns on `precision`'s graph rewrite in `session_config` (a ConfigProto); `remote`:
    for a session through a gRPC server (a task of a cluster) or the server itself."""
    entry = PRECISIONS[precision]
    options = session_config.graph_options.rewrite_options
    if entry.rewrite:
        setattr(options, entry.rewrite, rewriter_config_pb2.RewriterConfig.ON)
    if remote and not entry.remote_fusion:
        options.remapping = rewriter_config_pb2.RewriterConfig.OFF


def cpu_flags():
    """The instruction-set flags of this machine's CPU (/proc/cpuinfo); None if unknown."""
    try:
        with open('/proc/cpuinfo') as cpuinfo:
            for line in cpuinfo:
                if line.startswith('flags'):
                    return set(line.split(':', 1)[1].split())
    except OSError:
        pass
    return None


def rewrites(precision, flags):
    """Whether TensorFlow rewrites `precision`'s ops on a CPU with these instruction `flags`
    (cpu_flags(); None: unknown, taken to be able to); True for precisions that rewrite
    other devices' ops."""
    needed = PRECISIONS[precision].rewrite_cpu_flags
    return not needed or flags is None or bool(flags.intersection(needed))


def cpu_support(precision, flags):
    """How a CPU with these instruction `flags` (cpu_flags(); None: unknown) runs
    `precision`'s rewritten ops: 'native' (it has one of the precision's cpu_flags),
    'emulated' (TensorFlow rewrites the ops, and oneDNN emulates them: slower than float32),
    'not rewritten' (they stay float32), or 'unknown' (no flags); None for a precision that
    rewrites no CPU ops."""
    entry = PRECISIONS[precision]
    if entry.device_type != 'CPU':
        return None
    if flags is None:
        return 'unknown'
    if not rewrites(precision, flags):
        return 'not rewritten'
    return 'native' if flags.intersection(entry.cpu_flags) else 'emulated'


def slowness(precision, clone_device, flags):
    """One line saying why `precision` will run no faster than float32 here, or None.

    clone_device: the device string the clones run on ('/device:GPU:0'; no type: the CPU);
    flags: the CPU's instruction flags (cpu_flags(); None: unknown, taken to be fast)."""
    entry = PRECISIONS[precision]
    if entry.device_type is None:
        return None
    device_type = tf.DeviceSpec.from_string(clone_device).device_type or 'CPU'
    if device_type != entry.device_type:
        return (f'--precision={precision} converts the ops on {entry.device_type}s, and the '
                f'clones run on {device_type}s: the step stays float32, no faster than '
                '--precision=float32'
                + ('; use --precision=float16 on GPUs' if device_type == 'GPU' else ''))
    support = cpu_support(precision, flags)
    if support == 'not rewritten':
        return (f'--precision={precision}: this CPU has none of the '
                f'{", ".join(entry.rewrite_cpu_flags)} instructions TensorFlow needs to '
                f'rewrite to {precision}: the step stays float32, no faster than '
                '--precision=float32')
    if support == 'emulated':
        return (f'--precision={precision}: this CPU lacks the '
                f'{" and ".join(entry.cpu_flags)} instructions, so {precision} runs emulated, '
                'slower than --precision=float32')
    return None


class DynamicLossScale:
    """Dynamic loss scaling: each clone's loss is multiplied by `scale` before its gradients
    are taken and the gradients divided by it, so small float16 gradients do not underflow.
    An update whose gradients are all finite is applied, and after `period` such updates in
    a row the scale doubles; one with an Inf or NaN gradient (the scale was too large) is
    skipped: the variables, optimizer slots and global step stay as they were, the scale
    halves (not below 1) and `skipped` counts it.

    scale (float32 scalar), skipped (int64 scalar): local variables, in the LOSS_SCALE
    collection, made on the current device: each worker keeps its own and checkpoints hold
    none (a resumed run starts again from `initial`).
    """

    MAX_SCALE = 2.0 ** 24  # Far above any useful float16 scale, far below float32's range.

    def __init__(self, initial=2.0 ** 15, period=2000):
        self._period = period
        with tf.name_scope(None):
            self.scale = _local_scalar('loss_scale', initial, tf.float32)
            self.skipped = _local_scalar('loss_scale_skipped_updates', 0, tf.int64)
            self._finite_in_a_row = _local_scalar('loss_scale_finite_updates', 0, tf.int64)
        for variable in (self.scale, self.skipped):
            tf.add_to_collection(LOSS_SCALE, variable)

    def scaled(self, loss):
        """The loss, times the scale."""
        return tf.math.multiply(loss, self.scale, name='scaled_loss')

    def unscaled(self, grads_and_vars):
        """[(gradient / scale, variable)], for the gradients of scaled() losses."""
        reciprocal = 1.0 / self.scale
        result = []
        for grad, var in grads_and_vars:
            if isinstance(grad, tf.IndexedSlices):
                grad = tf.IndexedSlices(grad.values * reciprocal, grad.indices,
                                        grad.dense_shape)
            elif grad is not None:
                grad = grad * reciprocal
            result.append((grad, var))
        return result

    def apply_if_finite(self, grads_and_vars, apply):
        """Builds apply(grads_and_vars) (e.g. optimizer.apply_gradients), run only when every
        gradient is finite, and the scale's update; returns a bool tensor, whether it ran."""
        finite = tf.reduce_all(tf.stack([
            tf.reduce_all(tf.math.is_finite(
                grad.values if isinstance(grad, tf.IndexedSlices) else grad))
            for grad, _ in grads_and_vars if grad is not None]))

        def on_finite():
            with tf.control_dependencies([apply(grads_and_vars)]):
                in_a_row = self._finite_in_a_row.assign_add(1)
            grow = in_a_row >= self._period
            updates = [self.scale.assign(tf.where(
                           grow, tf.minimum(2.0 * self.scale, self.MAX_SCALE), self.scale)),
                       self._finite_in_a_row.assign(tf.where(grow, tf.zeros_like(in_a_row),
                                                             in_a_row))]
            with tf.control_dependencies(updates):
                return tf.constant(True)

        def on_overflow():
            updates = [self.scale.assign(tf.maximum(0.5 * self.scale, 1.0)),
                       self._finite_in_a_row.assign(tf.zeros([], tf.int64)),
                       self.skipped.assign_add(1)]
            with tf.control_dependencies(updates):
                return tf.constant(False)

        return tf.cond(finite, on_finite, on_overflow, name='apply_if_finite')


def _local_scalar(name, value, dtype):
    return tf.Variable(tf.constant(value, dtype), trainable=False, use_resource=True,
                       collections=[tf.GraphKeys.LOCAL_VARIABLES], name=name)


def loss_scale_variables(graph=None):
    """(scale, skipped updates) of the graph's DynamicLossScale; None if it has none."""
    variables = (graph or tf.get_default_graph()).get_collection(LOSS_SCALE)
    return tuple(variables) if variables else None
