"""Learning-rate schedules and optimizers by name, with TF-Slim's flags and defaults."""
import dataclasses
import math

import tensorflow.compat.v1 as tf

LEARNING_RATE_DECAY_TYPES = ('exponential', 'fixed', 'polynomial')


@dataclasses.dataclass(frozen=True)
class OptimizerParams:
    """Optimizer hyper-parameters; field names and defaults are slim's flags."""
    adadelta_rho: float = 0.95
    adagrad_initial_accumulator_value: float = 0.1
    adam_beta1: float = 0.9
    adam_beta2: float = 0.999
    opt_epsilon: float = 1.0
    ftrl_learning_rate_power: float = -0.5
    ftrl_initial_accumulator_value: float = 0.1
    ftrl_l1: float = 0.0
    ftrl_l2: float = 0.0
    momentum: float = 0.9
    rmsprop_momentum: float = 0.9
    rmsprop_decay: float = 0.9


# Name -> function(learning_rate, OptimizerParams) building the optimizer.
OPTIMIZERS = {
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
}


def _check_choice(flag, value, choices):
    if value not in choices:
        raise ValueError(f'unknown {flag} {value!r}; valid: {", ".join(sorted(choices))}')


def check_names(optimizer, learning_rate_decay_type):
    """Raises ValueError naming the flag if either name is unknown."""
    _check_choice('optimizer', optimizer, OPTIMIZERS)
    _check_choice('learning_rate_decay_type', learning_rate_decay_type,
                  LEARNING_RATE_DECAY_TYPES)


def decay_steps(num_samples, num_epochs_per_decay, examples_per_step):
    """Global steps between decays, so that the rate decays every `num_epochs_per_decay`
    epochs whatever the number of clones and replicas.

    examples_per_step: examples one global step consumes (batch_size x num_clones, times
    replicas_to_aggregate with sync replicas). Slim divided by batch_size alone, so adding
    clones slowed the decay in epochs; here an epoch means an epoch.
    """
    return max(1, int(math.ceil(num_samples * num_epochs_per_decay / examples_per_step)))


def learning_rate(decay_type, base_rate, global_step, steps_per_decay, decay_factor=0.94,
                  end_rate=0.0001):
    """The learning-rate tensor of `decay_type` at `global_step`.

    exponential: base_rate * decay_factor ** floor(step / steps_per_decay) (staircase);
    fixed: base_rate; polynomial: linear (power 1) from base_rate to end_rate over
    steps_per_decay steps, then end_rate.
    """
    _check_choice('learning_rate_decay_type', decay_type, LEARNING_RATE_DECAY_TYPES)
    if decay_type == 'exponential':
        rate = tf.train.exponential_decay(base_rate, global_step, steps_per_decay,
                                          decay_factor, staircase=True)
    elif decay_type == 'fixed':
        rate = tf.constant(base_rate, tf.float32)
    else:
        rate = tf.train.polynomial_decay(base_rate, global_step, steps_per_decay, end_rate,
                                         power=1.0, cycle=False)
    return rate


def optimizer(name, rate, params=OptimizerParams()):
    """The tf.compat.v1 optimizer `name` with learning rate `rate` (float or tensor)."""
    _check_choice('optimizer', name, OPTIMIZERS)
    return OPTIMIZERS[name](rate, params)
