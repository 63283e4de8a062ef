"""slim-deploy: TF-Slim's model_deploy, nets and training scripts on current TensorFlow."""
import os

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

# slim_deploy's entry-script modules, each also installed as a console command of the
# same name (a checkout's NAME.py at the top runs one too).
ENTRY_SCRIPTS = ['train_image_classifier', 'eval_image_classifier', 'export_inference_graph',
                 'download_and_convert_data', 'check_equivalence', 'plan_cluster']
# Everything installs under slim_deploy/ (tests/, benchmarks/, examples/, ... do not),
# and PTH_FILE beside it: site runs its line at interpreter start, importing slim_deploy,
# whose aliases give TF-Slim's import paths (from nets import nets_factory) without
# claiming those top-level names. The line does nothing once slim_deploy is gone (an
# editable install's checkout deleted), rather than fail at every start.
PTH_FILE = 'slim_deploy.pth'
PTH_LINE = ("import sys; any(finder.find_spec('slim_deploy', None) for finder in "
            "sys.meta_path if hasattr(finder, 'find_spec')) and __import__('slim_deploy')\n")
# TensorFlow no longer installs TensorBoard (2.21 dropped the dependency): the releases made
# with the TensorFlow versions install_requires allows (tensorboard 2.X goes with TF 2.X).
TENSORBOARD = 'tensorboard>=2.16,<2.22'


class BuildPyWithPth(build_py):
    """build_py, also writing PTH_FILE at the top of what gets installed: into build_lib
    for a wheel; for an editable install (PEP 660), whose wheel holds what its install
    step wrote but nothing of build_lib, into that step's install_lib."""

    def run(self):
        super().run()
        top = (self.get_finalized_command('install').install_lib if self.editable_mode
               else self.build_lib)
        self.mkpath(top)
        with open(os.path.join(top, PTH_FILE), 'w', encoding='utf-8') as pth:
            pth.write(PTH_LINE)


setup(
    name='slim-deploy',
    version='0.1.0',
    description='Data-parallel training of TF-Slim image classifiers on TensorFlow 2.16+',
    python_requires='>=3.10',
    packages=find_packages(include=['slim_deploy', 'slim_deploy.*']),
    package_data={'slim_deploy.datasets': ['digits.npz']},
    cmdclass={'build_py': BuildPyWithPth},
    entry_points={'console_scripts': [
        *(f'{script} = slim_deploy.{script}:run' for script in ENTRY_SCRIPTS),
        'launch_cluster = slim_deploy.cluster.launch:run',
    ]},
    install_requires=[
        # slim_deploy/common/compat.py patches TensorFlow's private modules and is tested on
        # 2.16 to 2.21: raise the bound (and compat's NEWEST_TESTED) only after testing a newer
        # one. tf-keras pins the TensorFlow minor version it was built for, so pip picks a
        # matching pair; slim.batch_norm needs its legacy layers.
        'tensorflow>=2.16,<2.22',
        'tf-keras>=2.16,<2.22',
        'tf-slim>=1.1',
        'numpy',
        'pyyaml',  # `launch_cluster --jobset` prints a Kubernetes manifest as YAML.
    ],
    extras_require={
        # tests/image_classifier/test_tensorboard.py reads the event files;
        # tests/cluster/test_jobset.py checks pod templates against the official Kubernetes
        # client's models (from 37 on, its ApiClient.deserialize takes JSON text);
        # pytest-xdist runs the suite on every core (-n auto).
        'test': ['pytest', 'pytest-xdist>=3.0', TENSORBOARD, 'kubernetes>=37'],
        'tensorboard': [TENSORBOARD],
        # The manual (docs/): Sphinx with Markdown pages (MyST) and the furo theme.
        'docs': ['sphinx>=7.2', 'myst-parser>=3.0', 'furo>=2024.1.29'],
    },
)
