"""The worked examples run: deploy() with two clones, a Keras model under deploy(), and the
cluster recipe."""
import os
import re
import subprocess
import sys

import pytest

from helpers import REPO, run_script


@pytest.mark.slow
def test_deploy_two_clones_example_trains():
    result = run_script('examples/deploy_two_clones.py', '--steps', '60')
    assert result.returncode == 0, result.stderr[-3000:]
    assert 'clone 1    /device:CPU:1  (scope clone_1/)' in result.stdout
    losses = [float(x) for x in re.findall(r'mean loss (\d+\.\d+)', result.stdout)]
    assert len(losses) == 3 and losses[-1] < losses[0]


@pytest.mark.slow
@pytest.mark.parametrize('variable_update', ['parameter_server', 'replicated'])
def test_deploy_keras_model_example_trains_one_model(variable_update):
    result = run_script('examples/deploy_keras_model.py', '--steps', '60',
                        '--variable_update', variable_update)
    assert result.returncode == 0, result.stderr[-3000:]
    assert re.search(r'^clone 1 +/device:CPU:1  \(scope clone_1/\)$', result.stdout, re.M)
    assert ('6 trainable variables, one model: dense/kernel, dense/bias, '
            'batch_normalization/gamma, batch_normalization/beta, dense_1/kernel, '
            'dense_1/bias') in result.stdout
    losses = [float(x) for x in re.findall(r'mean loss (\d+\.\d+)', result.stdout)]
    assert len(losses) == 3 and losses[-1] < losses[0]
    moving_mean = float(re.search(r'moving mean: norm (\d+\.\d+)', result.stdout)[1])
    assert moving_mean > 0.1  # Batch norm's updates ran.


@pytest.mark.cluster
def test_cluster_recipe_trains_with_sync_replicas_and_evaluates(tmp_path):
    result = subprocess.run(
        ['bash', os.path.join(REPO, 'scripts', 'train_cluster_on_digits.sh'), '1', '2',
         str(tmp_path), '--sync_replicas', '--replicas_to_aggregate=2',
         '--max_number_of_steps=60'],
        capture_output=True, text=True, timeout=300,
        env={**os.environ, 'TF_CPP_MIN_LOG_LEVEL': '2', 'PYTHON': sys.executable})
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    assert re.search(r'\[worker:1\] .*Finished training at global step 60', result.stdout)
    assert re.search(r'accuracy \d\.\d+  recall@5 \d\.\d+  examples 360  global step 60',
                     result.stdout + result.stderr)
