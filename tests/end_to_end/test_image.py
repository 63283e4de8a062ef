"""The Containerfile's image, built here with tools/build_image.sh (podman; skipped in one line
where podman or mmdebstrap is missing): the console commands run in it as its unprivileged
user, and nothing of the build is left in it. test_jobset rehearses a JobSet's pods in it."""
from importlib import metadata
import os
import subprocess
import sys

import pytest

import images

pytestmark = [pytest.mark.slow, pytest.mark.cluster]


def test_the_image_runs_the_console_commands_as_its_user():
    printed = images.build()
    name, size = printed.split()
    assert name == images.IMAGE and size.endswith('B')
    with images.image_root() as image:
        assert image.uid != 0 and image.env['PATH'].startswith('/opt/slim-deploy/bin:')
        commands = [entry.name for entry in metadata.entry_points(group='console_scripts')
                    if entry.value.startswith('slim_deploy.')]
        assert len(commands) == 6
        bin_here = os.path.dirname(sys.executable) + '/'
        for command in commands:  # As this checkout's (absl's --help exits 1).
            here = subprocess.run([bin_here + command, '--help'], capture_output=True,
                                  text=True, timeout=120)
            there = subprocess.run(image.command([command, '--help']), env=image.env,
                                   capture_output=True, text=True, timeout=120)
            assert there.returncode == here.returncode, (command, there.stderr[-2000:])
            assert (there.stdout.replace('/opt/slim-deploy/bin/', '') ==
                    here.stdout.replace(bin_here, ''))
            assert 'usage' in there.stdout.lower()
        result = subprocess.run(image.command(['id', '-un']), env=image.env,
                                capture_output=True, text=True, check=True)
        assert result.stdout.strip() == images.config()['User'] == 'trainer'
        # Nothing of the build: no sources, no pip, no bytecode caches of the venv.
        assert not os.path.exists(os.path.join(image.root, 'src'))
        venv = os.path.join(image.root, 'opt/slim-deploy')
        assert not os.path.exists(os.path.join(venv, 'bin/pip'))
        assert not [d for d, _, _ in os.walk(venv) if d.endswith('__pycache__')]
