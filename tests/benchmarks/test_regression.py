"""benchmarks.regression: the comparison of a base commit's ratios with the head's, and one
tiny pair of runs end to end (base and head each with its own code)."""
import json
import sys

import pytest

from benchmarks import regression

from helpers import REPO, run


def test_a_ratio_that_falls_beyond_the_tolerance_is_a_regression():
    base = [{'collective / MWMS': 1.00, 'ps / Mirrored': 1.00},
            {'collective / MWMS': 1.02, 'ps / Mirrored': 0.98},
            {'collective / MWMS': 0.98, 'ps / Mirrored': 1.02}]
    head = [{'collective / MWMS': 0.94, 'ps / Mirrored': 0.97},
            {'collective / MWMS': 0.95, 'ps / Mirrored': 0.99},
            {'collective / MWMS': 0.90, 'ps / Mirrored': 0.96}]
    compared = regression.compare(base, head, tolerance=0.05)
    assert compared['collective / MWMS'] == {
        'base': [1.00, 1.02, 0.98], 'head': [0.94, 0.95, 0.90], 'base_median': 1.00,
        'head_median': 0.94, 'change': pytest.approx(0.94), 'regression': True}
    assert compared['ps / Mirrored']['change'] == pytest.approx(0.97)
    assert compared['ps / Mirrored']['regression'] is False  # 3% < 5%.


def test_a_base_that_cannot_be_checked_out_is_one_line_and_exit_code_2():
    result = run([sys.executable, '-m', 'benchmarks.regression', '--base', 'no-such-commit'],
                 cwd=REPO, timeout=60)
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1].startswith(
        "python -m benchmarks.regression: error: --base 'no-such-commit': fatal: ")


@pytest.mark.slow
def test_one_pair_compares_a_deploy_setup_with_its_peer():
    result = run([sys.executable, '-m', 'benchmarks.regression', '--base', 'HEAD', '--pairs',
                  '1', '--model_name', 'lenet', '--batch_size', '2', '--steps', '2',
                  '--rounds', '1', '--variable_update', 'parameter_server', '--tolerance', '1',
                  '--json'], cwd=REPO, timeout=400)
    assert result.returncode == 0, result.stderr[-3000:]
    output = json.loads(result.stdout)
    assert output['base'] == output['head'].rstrip('+') and output['pairs'] == 1
    assert list(output['ratios']) == ['parameter_server float32 / MirroredStrategy float32']
    for ratio in output['ratios'].values():
        assert len(ratio['base']) == len(ratio['head']) == 1 and ratio['base_median'] > 0
    assert 'regression-base-' not in run(['git', 'worktree', 'list'], cwd=REPO).stdout
