"""The container image of the Containerfile, built with tools/build_image.sh, and its
filesystem to run commands in as a container runtime would (podman run cannot run here:
chroot into a writable mount of a container made from the image, with /proc, /sys, /dev and
the pod's volumes bind-mounted). Needs root."""
import contextlib
import functools
import json
import os
import shutil
import subprocess

import pytest

from helpers import REPO

IMAGE = 'localhost/slim-deploy:test'


@functools.cache
def build():
    """Builds IMAGE from this checkout, once per test run (the build keeps no layers to
    reuse; it replaces the IMAGE of the run before); skips the test in one line when podman
    or mmdebstrap is missing. Returns the line the build printed: IMAGE and its size."""
    missing = [tool for tool in ('podman', 'mmdebstrap') if not shutil.which(tool)]
    if missing:
        pytest.skip(f'{" and ".join(missing)} missing: apt install podman mmdebstrap to build '
                    'and rehearse the image')
    result = subprocess.run(['bash', 'tools/build_image.sh', IMAGE], cwd=REPO,
                            capture_output=True, text=True, timeout=1800)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def config():
    """The image's config (podman image inspect's Config: User, Env, Cmd, ...)."""
    result = subprocess.run(['podman', 'image', 'inspect', IMAGE], check=True,
                            capture_output=True, text=True)
    return json.loads(result.stdout)[0]['Config']


@contextlib.contextmanager
def image_root(volumes=()):
    """Yields an ImageRoot of IMAGE with each directory of `volumes` mounted at its own
    path; removes the container and its mounts on exit."""
    container = subprocess.run(['podman', 'create', IMAGE, '/bin/true'], check=True,
                               capture_output=True, text=True).stdout.strip()
    mounted = []
    try:
        root = subprocess.run(['podman', 'mount', container], check=True,
                              capture_output=True, text=True).stdout.strip()
        for path in ['/proc', '/sys', '/dev', *volumes]:
            target = root + path
            os.makedirs(target, exist_ok=True)
            subprocess.run(['mount', '--rbind', path, target], check=True)  # /dev/shm too.
            mounted.append(target)
        yield ImageRoot(root)
    finally:
        for target in reversed(mounted):
            subprocess.run(['umount', '--recursive', '--lazy', target], check=True)
        subprocess.run(['podman', 'umount', container], capture_output=True)
        subprocess.run(['podman', 'rm', container], capture_output=True, check=True)


class ImageRoot:
    """The writable filesystem at `root` of a container of IMAGE."""

    def __init__(self, root):
        self.root = root
        image = config()
        with open(os.path.join(root, 'etc/passwd')) as f:
            entry = next(line.split(':') for line in f if line.split(':')[0] == image['User'])
        self.uid, self.gid, self.home = int(entry[2]), int(entry[3]), entry[5]
        self.env = {**dict(item.split('=', 1) for item in image['Env']), 'HOME': self.home}

    def command(self, argv):
        """`argv` as the image's user runs it inside (its executable found on the image's
        PATH): pass self.env (and the pod's) as the environment."""
        return ['chroot', f'--userspec={self.uid}:{self.gid}', self.root, *argv]
