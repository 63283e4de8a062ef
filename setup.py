"""slim-deploy: TF-Slim's model_deploy, nets and training scripts on current TensorFlow."""
from setuptools import find_packages, setup

# Top-level scripts, each also installed as a console command of the same name.
ENTRY_SCRIPTS = ['train_image_classifier', 'eval_image_classifier', 'export_inference_graph',
                 'download_and_convert_data', 'check_equivalence']
# Installed with all their subpackages; tests/, benchmarks/, examples/, ... are not.
PACKAGES = ['deployment', 'nets', 'datasets', 'preprocessing', 'image_classifier']
# TensorFlow no longer installs TensorBoard (2.21 dropped the dependency): the releases made
# with the TensorFlow versions install_requires allows (tensorboard 2.X goes with TF 2.X).
TENSORBOARD = 'tensorboard>=2.16,<2.22'

setup(
    name='slim-deploy',
    version='0.1.0',
    description='Data-parallel training of TF-Slim image classifiers on TensorFlow 2.16+',
    python_requires='>=3.10',
    packages=find_packages(include=[pattern for package in PACKAGES
                                    for pattern in (package, f'{package}.*')]),
    py_modules=ENTRY_SCRIPTS,
    entry_points={'console_scripts': [
        *(f'{script} = {script}:run' for script in ENTRY_SCRIPTS),
        'launch_cluster = deployment.launch:run',
    ]},
    install_requires=[
        # deployment/compat.py patches TensorFlow's private modules and is tested on 2.16
        # to 2.21: raise the bound (and compat's NEWEST_TESTED) only after testing a newer
        # one. tf-keras pins the TensorFlow minor version it was built for, so pip picks a
        # matching pair; slim.batch_norm needs its legacy layers.
        'tensorflow>=2.16,<2.22',
        'tf-keras>=2.16,<2.22',
        'tf-slim>=1.1',
        'numpy',
        'scikit-learn',  # Only for the embedded digits dataset (load_digits, no download).
        'pyyaml',  # `launch_cluster --jobset` prints a Kubernetes manifest as YAML.
    ],
    extras_require={
        # tests/test_tensorboard.py reads the event files; tests/test_jobset.py checks pod
        # templates against the official Kubernetes client's models (from 37 on, its
        # ApiClient.deserialize takes JSON text).
        'test': ['pytest', TENSORBOARD, 'kubernetes>=37'],
        'tensorboard': [TENSORBOARD],
        # The manual (docs/): Sphinx with Markdown pages (MyST) and the furo theme.
        'docs': ['sphinx>=7.2', 'myst-parser>=3.0', 'furo>=2024.1.29'],
    },
)
