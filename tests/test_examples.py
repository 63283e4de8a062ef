"""The worked example runs and its loss falls."""
import os
import re
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_deploy_two_clones_example_trains():
    result = subprocess.run(
        [sys.executable, os.path.join(REPO, 'examples', 'deploy_two_clones.py'), '--steps', '60'],
        cwd=REPO, capture_output=True, text=True, timeout=300,
        env={**os.environ, 'TF_CPP_MIN_LOG_LEVEL': '2'})
    assert result.returncode == 0, result.stderr[-3000:]
    assert 'clone 1    /device:CPU:1  (scope clone_1/)' in result.stdout
    losses = [float(x) for x in re.findall(r'mean loss (\d+\.\d+)', result.stdout)]
    assert len(losses) == 3 and losses[-1] < losses[0]
