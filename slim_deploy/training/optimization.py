"""Learning-rate schedules and optimizers by name, with TF-Slim's flags and defaults.

`OPTIMIZERS` (flag --optimizer), `LEARNING_RATE_DECAY_TYPES` (flag
--learning_rate_decay_type) and `LEARNING_RATE_SCALINGS` (flag --learning_rate_scaling) are
the registries; `optimizer()`, `learning_rate()` and `scaled_learning_rate()` build from them.
"""
import dataclasses
import math

import tensorflow.compat.v1 as tf

from slim_deploy.common.bounds import Bounds, check_settings
from slim_deploy.common.errors import UsageError
from slim_deploy.common.registry import Registry

_FRACTION = Bounds.numbers(0, 1)  # Momenta and decay rates.
_BETA = Bounds.numbers(0, 1, open_maximum=True)  # Adam divides by 1 - beta ** step.
_NOT_NEGATIVE = Bounds.numbers(0)


def _hyperparameter(default, help_text, bounds):
    """A field of OptimizerParams; `help_text` is its flag's help, `bounds` (a Bounds) the
    values it takes."""
    return dataclasses.field(default=default, metadata={'help': help_text, 'bounds': bounds})


@dataclasses.dataclass(frozen=True)
class OptimizerParams:
    """Optimizer hyper-parameters; field names and defaults are slim's flags. A value outside
    its field's bounds raises UsageError naming the flag."""
    adadelta_rho: float = _hyperparameter(0.95, 'Decay rate of adadelta.', _FRACTION)
    adagrad_initial_accumulator_value: float = _hyperparameter(
        0.1, 'Starting value of the adagrad accumulators.', Bounds.numbers(0, open_minimum=True))
    adam_beta1: float = _hyperparameter(0.9, 'Decay rate of adam\'s 1st moment estimates.',
                                        _BETA)
    adam_beta2: float = _hyperparameter(0.999, 'Decay rate of adam\'s 2nd moment estimates.',
                                        _BETA)
    opt_epsilon: float = _hyperparameter(1.0, 'Epsilon of adadelta, adam and rmsprop.',
                                         _NOT_NEGATIVE)
    ftrl_learning_rate_power: float = _hyperparameter(-0.5, 'Learning-rate power of ftrl.',
                                                      Bounds.numbers(maximum=0))
    ftrl_initial_accumulator_value: float = _hyperparameter(
        0.1, 'Starting value of the ftrl accumulators.', _NOT_NEGATIVE)
    ftrl_l1: float = _hyperparameter(0.0, 'L1 regularization strength of ftrl.', _NOT_NEGATIVE)
    ftrl_l2: float = _hyperparameter(0.0, 'L2 regularization strength of ftrl.', _NOT_NEGATIVE)
    momentum: float = _hyperparameter(0.9, 'Momentum of the momentum optimizer.', _FRACTION)
    rmsprop_momentum: float = _hyperparameter(0.9, 'Momentum of rmsprop.', _FRACTION)
    rmsprop_decay: float = _hyperparameter(0.9, 'Decay of rmsprop\'s mean square.', _FRACTION)

    def __post_init__(self):
        check_settings(self, UsageError)


# Name -> function(learning_rate, OptimizerParams) building the optimizer.
OPTIMIZERS = Registry('optimizer', {
    'adadelta': lambda lr, p: tf.train.AdadeltaOptimizer(
        lr, rho=p.adadelta_rho, epsilon=p.opt_epsilon),
    'adagrad': lambda lr, p: tf.train.AdagradOptimizer(
        lr, initial_accumulator_value=p.adagrad_initial_accumulator_value),
    'adam': lambda lr, p: tf.train.AdamOptimizer(
        lr, beta1=p.adam_beta1, beta2=p.adam_beta2, epsilon=p.opt_epsilon),
    'ftrl': lambda lr, p: tf.train.FtrlOptimizer(
        lr, learning_rate_power=p.ftrl_learning_rate_power,
        initial_accumulator_value=p.ftrl_initial_accumulator_value,
        l1_regularization_strength=p.ftrl_l1, l2_regularization_strength=p.ftrl_l2),
    'momentum': lambda lr, p: tf.train.MomentumOptimizer(lr, momentum=p.momentum, name='Momentum'),
    'rmsprop': lambda lr, p: tf.train.RMSPropOptimizer(
        lr, decay=p.rmsprop_decay, momentum=p.rmsprop_momentum, epsilon=p.opt_epsilon),
    'sgd': lambda lr, p: tf.train.GradientDescentOptimizer(lr),
})


def _exponential(base_rate, global_step, steps_per_decay, decay_factor, end_rate):
    """base_rate * decay_factor ** floor(global_step / steps_per_decay): a staircase."""
    return tf.train.exponential_decay(base_rate, global_step, steps_per_decay, decay_factor,
                                      staircase=True)


def _fixed(base_rate, global_step, steps_per_decay, decay_factor, end_rate):
    """base_rate at every step."""
    return tf.constant(base_rate, tf.float32)


def _polynomial(base_rate, global_step, steps_per_decay, decay_factor, end_rate):
    """Linear (power 1) from base_rate to end_rate over steps_per_decay steps, then end_rate."""
    return tf.train.polynomial_decay(base_rate, global_step, steps_per_decay, end_rate,
                                     power=1.0, cycle=False)


# Name -> function(base_rate, global_step, steps_per_decay, decay_factor, end_rate) building
# the learning-rate tensor.
LEARNING_RATE_DECAY_TYPES = Registry('learning_rate_decay_type', {
    'exponential': _exponential,
    'fixed': _fixed,
    'polynomial': _polynomial,
})


# Name -> function(learning_rate, global_batch, base_batch_size) giving the rate to train
# with: 'linear' is Goyal et al. 2017's rule, the rate grows with the global batch.
LEARNING_RATE_SCALINGS = Registry('learning_rate_scaling', {
    'linear': lambda rate, global_batch, base_batch_size: rate * global_batch / base_batch_size,
    'none': lambda rate, global_batch, base_batch_size: rate,
})


def scaled_learning_rate(scaling, rate, global_batch, base_batch_size):
    """`rate` scaled by `scaling` (a name in LEARNING_RATE_SCALINGS) for a global batch of
    `global_batch` examples per step; UsageError for an unknown name."""
    return LEARNING_RATE_SCALINGS[scaling](rate, global_batch, base_batch_size)


def epochs_to_steps(num_samples, epochs, examples_per_step):
    """Global steps that consume `epochs` epochs of `num_samples` examples, rounded up.

    examples_per_step: examples one global step consumes (batch_size x num_clones, times
    replicas_to_aggregate with sync replicas, or the workers when collective). Slim divided
    by batch_size alone, so adding clones slowed the decay in epochs; here an epoch means an
    epoch.
    """
    return int(math.ceil(num_samples * epochs / examples_per_step))


def decay_steps(num_samples, num_epochs_per_decay, examples_per_step):
    """Global steps between decays (at least 1), so that the rate decays every
    `num_epochs_per_decay` epochs whatever the number of clones and replicas."""
    return max(1, epochs_to_steps(num_samples, num_epochs_per_decay, examples_per_step))


def learning_rate(decay_type, base_rate, global_step, steps_per_decay, decay_factor=0.94,
                  end_rate=0.0001, warmup_steps=0, warmup_rate=0.0):
    """The float32 scalar learning rate of schedule `decay_type` (a name in
    LEARNING_RATE_DECAY_TYPES) at `global_step`; UsageError for an unknown name.

    With warmup_steps > 0 the rate first rises linearly from warmup_rate at step 0 to
    base_rate at step warmup_steps, then follows the schedule (at the global step).
    """
    rate = LEARNING_RATE_DECAY_TYPES[decay_type](base_rate, global_step, steps_per_decay,
                                                 decay_factor, end_rate)
    if not warmup_steps:
        return rate
    progress = tf.cast(global_step, tf.float32) / float(warmup_steps)
    warming = warmup_rate + (base_rate - warmup_rate) * progress
    return tf.where(global_step < warmup_steps, warming, rate, name='warmup_learning_rate')


def optimizer(name, rate, params=OptimizerParams()):
    """The tf.compat.v1 optimizer `name` (in OPTIMIZERS) with learning rate `rate` (float or
    tensor); UsageError for an unknown name."""
    return OPTIMIZERS[name](rate, params)
