"""Learning-rate schedules and optimizers built by name."""
import math

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from slim_deploy.common.errors import UsageError
from slim_deploy.training import optimization
from slim_deploy.training.optimization import OptimizerParams


def _rates(decay_type, steps, **kwargs):
    """The learning rate at each global step in `steps`."""
    with tf.Graph().as_default():
        step = tf.placeholder(tf.int64, [])
        rate = optimization.learning_rate(decay_type, 0.1, step, 10, **kwargs)
        assert rate.dtype == tf.float32 and rate.shape == []
        with tf.Session() as sess:
            return [sess.run(rate, {step: s}) for s in steps]


def test_exponential_decay_is_a_staircase():
    rates = _rates('exponential', [0, 9, 10, 25], decay_factor=0.5)
    np.testing.assert_allclose(rates, [0.1, 0.1, 0.05, 0.025], rtol=1e-6)


def test_fixed_rate():
    np.testing.assert_allclose(_rates('fixed', [0, 1000]), [0.1, 0.1], rtol=1e-6)


def test_polynomial_decay_is_linear_then_flat():
    rates = _rates('polynomial', [0, 5, 10, 50], end_rate=0.02)
    np.testing.assert_allclose(rates, [0.1, 0.06, 0.02, 0.02], rtol=1e-5)


def test_decay_steps_count_every_clone_and_replica():
    # 50000 examples, decay every 2 epochs, 32 per clone x 4 clones: 781.25 -> 782 steps.
    assert optimization.decay_steps(50000, 2.0, 32 * 4) == 782
    assert optimization.decay_steps(100, 0.001, 64) == 1


def _one_step(name, params, gradient=2.0):
    """Value of x (starting at 1.0) after one step on loss x^2 (gradient 2) at rate 0.1."""
    with tf.Graph().as_default():
        x = tf.Variable(1.0)
        opt = optimization.optimizer(name, 0.1, params)
        train = opt.minimize(tf.square(x))
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            sess.run(train)
            return opt, sess.run(x)


# Expected x after one step from 1.0 with gradient 2 and rate 0.1, from each update rule.
FIRST_STEPS = {
    'sgd': (OptimizerParams(), 1 - 0.1 * 2),
    'momentum': (OptimizerParams(momentum=0.5), 1 - 0.1 * 2),
    'adagrad': (OptimizerParams(adagrad_initial_accumulator_value=0.5),
                1 - 0.1 * 2 / math.sqrt(0.5 + 4)),
    # TensorFlow's RMSProp starts its mean square at 1: ms = 0.8 * 1 + 0.2 * 4.
    'rmsprop': (OptimizerParams(rmsprop_decay=0.8, rmsprop_momentum=0.0, opt_epsilon=0.5),
                1 - 0.1 * 2 / math.sqrt(0.8 + 0.2 * 4 + 0.5)),
    # Bias-corrected Adam's first step is rate * g / (|g| + epsilon').
    'adam': (OptimizerParams(adam_beta1=0.8, adam_beta2=0.9, opt_epsilon=1e-8), 1 - 0.1),
    # Adadelta: accum = (1 - rho) g^2; update = sqrt(eps) / sqrt(accum + eps) * g.
    'adadelta': (OptimizerParams(adadelta_rho=0.5, opt_epsilon=0.25),
                 1 - 0.1 * math.sqrt(0.25) / math.sqrt(0.5 * 4 + 0.25) * 2),
}


@pytest.mark.parametrize('name', sorted(optimization.OPTIMIZERS))
def test_every_optimizer_takes_its_hyper_parameters(name):
    if name == 'ftrl':  # No closed form worth writing: check it moves downhill.
        opt, x = _one_step(name, OptimizerParams(ftrl_l1=0.0))
        assert isinstance(opt, tf.train.FtrlOptimizer) and x < 1.0
        return
    params, expected = FIRST_STEPS[name]
    _, x = _one_step(name, params)
    assert x == pytest.approx(expected, rel=1e-5)


def test_every_optimizer_has_a_first_step_check():
    assert set(FIRST_STEPS) | {'ftrl'} == set(optimization.OPTIMIZERS)


@pytest.mark.parametrize('call, message', [
    (lambda: optimization.optimizer('lamb', 0.1),
     "unknown --optimizer 'lamb'; valid: adadelta, adagrad, adam, ftrl, momentum, rmsprop, sgd"),
    (lambda: optimization.OPTIMIZERS['Adam'],
     "unknown --optimizer 'Adam'; valid: adadelta, adagrad, adam, ftrl, momentum, rmsprop, sgd"),
    (lambda: optimization.learning_rate('cosine', 0.1, 0, 10),
     "unknown --learning_rate_decay_type 'cosine'; valid: exponential, fixed, polynomial"),
    (lambda: optimization.LEARNING_RATE_DECAY_TYPES['step'],
     "unknown --learning_rate_decay_type 'step'; valid: exponential, fixed, polynomial"),
])
def test_unknown_names_name_the_flag_and_list_the_valid_ones(call, message):
    with pytest.raises(UsageError) as error:
        call()
    assert str(error.value) == message


def test_warmup_rises_linearly_then_follows_the_schedule():
    rates = _rates('exponential', [0, 5, 10, 19, 20, 30], decay_factor=0.5, warmup_steps=10,
                   warmup_rate=0.02)
    # 0.02 -> 0.1 over 10 steps, then the staircase at the global step (0.05 from step 10).
    np.testing.assert_allclose(rates, [0.02, 0.06, 0.05, 0.05, 0.025, 0.0125], rtol=1e-6)
    np.testing.assert_allclose(_rates('fixed', [0, 2, 4, 100], warmup_steps=4),
                               [0.0, 0.05, 0.1, 0.1], rtol=1e-6)


def test_learning_rate_scaling():
    assert optimization.scaled_learning_rate('linear', 0.1, 1024, 256) == pytest.approx(0.4)
    assert optimization.scaled_learning_rate('none', 0.1, 1024, 256) == 0.1
    with pytest.raises(UsageError, match="unknown --learning_rate_scaling 'sqrt'; valid: "
                                         'linear, none'):
        optimization.scaled_learning_rate('sqrt', 0.1, 1024, 256)


def test_epochs_to_steps_rounds_up():
    assert optimization.epochs_to_steps(1437, 1.0, 64) == 23
    assert optimization.epochs_to_steps(1437, 0.0, 64) == 0
