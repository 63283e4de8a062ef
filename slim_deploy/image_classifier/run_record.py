"""A training run's record: run_config.json in its train_dir, written by the chief.

It holds every setting as slim's flags ('flags'), the placement plan and a few derived
facts. Evaluation and export pointed at a run (--checkpoint_path=TRAIN_DIR or one of its
checkpoints) take the run's model, dataset and input settings from it as their defaults,
and the quantized graph (--quantize) when it trained quantization-aware.
"""
import json
import os

from slim_deploy.common import fileio
from slim_deploy.common.errors import UsageError
from slim_deploy.image_classifier import config as run_config

FILENAME = 'run_config.json'


def trained_quantized(flags):
    """Whether the run of `flags` (its recorded flags) trained quantization-aware."""
    return flags.get('quantize_delay', -1) >= 0


# {flag of evaluation or export: the run's flag it defaults to, or a function of the run's
# flags giving its default}.
EVAL_DEFAULTS = {
    'model_name': 'model_name', 'dataset_name': 'dataset_name', 'dataset_dir': 'dataset_dir',
    'labels_offset': 'labels_offset', 'preprocessing_name': 'preprocessing_name',
    'use_grayscale': 'use_grayscale', 'moving_average_decay': 'moving_average_decay',
    'eval_image_size': 'train_image_size', 'quantize': trained_quantized,
}
EXPORT_DEFAULTS = {
    'model_name': 'model_name', 'dataset_name': 'dataset_name', 'dataset_dir': 'dataset_dir',
    'dataset_split_name': 'dataset_split_name', 'labels_offset': 'labels_offset',
    'preprocessing_name': 'preprocessing_name', 'use_grayscale': 'use_grayscale',
    'image_size': 'train_image_size', 'quantize': trained_quantized,
}


def run_defaults(recorded, defaults):
    """{flag: default} of the flags that `defaults` (EVAL_DEFAULTS or EXPORT_DEFAULTS) maps,
    from a run's flags `recorded` ({flag: value}), leaving out those it did not record."""
    return {flag: run_flag(recorded) if callable(run_flag) else recorded[run_flag]
            for flag, run_flag in defaults.items()
            if callable(run_flag) or run_flag in recorded}


def eval_config(checkpoint_path, **flags):
    """The EvalConfig evaluating checkpoint_path (a train_dir or a checkpoint in one) with
    `flags` ({flag: value}), the others defaulting to the run's (with_run_defaults)."""
    return run_config.EvalConfig.from_flags(with_run_defaults(
        checkpoint_path, {'checkpoint_path': checkpoint_path, **flags}, EVAL_DEFAULTS))


def export_config(checkpoint_path, **flags):
    """The ExportConfig exporting checkpoint_path (a train_dir or a checkpoint in one) with
    `flags` ({flag: value}), the others defaulting to the run's (with_run_defaults)."""
    return run_config.ExportConfig.from_flags(with_run_defaults(
        checkpoint_path, {'checkpoint_path': checkpoint_path, **flags}, EXPORT_DEFAULTS))


def write(config, **facts):
    """Writes config.train_dir/run_config.json (atomically): config.as_flags() under
    'flags', the dataset_dir made absolute (evaluation may run from another directory), and
    `facts` (JSON-serializable values)."""
    flags = config.as_flags()
    if flags['dataset_dir']:
        flags['dataset_dir'] = os.path.abspath(os.path.expanduser(flags['dataset_dir']))
    fileio.write_json_atomically(os.path.join(config.train_dir, FILENAME),
                                 {'flags': flags, **facts})


def find(checkpoint_path):
    """(path, record) of the run_config.json next to `checkpoint_path` (a train_dir or a
    checkpoint prefix in one); None when there is none."""
    directory = checkpoint_path if os.path.isdir(checkpoint_path) else os.path.dirname(
        checkpoint_path)
    path = os.path.join(directory, FILENAME)
    if not os.path.isfile(path):
        return None
    try:
        with open(path, encoding='utf-8') as f:
            return path, json.load(f)
    except (OSError, ValueError) as e:
        raise UsageError(f'cannot read {path}: {e}') from None


def with_run_defaults(checkpoint_path, given, defaults):
    """The flags `given` ({flag: value} set by the user) completed from the run that wrote
    checkpoint_path's run_config.json, as `defaults` maps them (see run_defaults); `given`
    unchanged when there is no run record.

    Raises UsageError when a given flag contradicts the model the run trained: another
    model_name, or a dataset_name/labels_offset/use_grayscale giving the network another
    number of classes or input channels.
    """
    found = find(checkpoint_path)
    if found is None:
        return dict(given)
    path, record = found
    recorded = record.get('flags', {})
    values = {**run_defaults(recorded, defaults), **given}
    if values.get('model_name') != recorded.get('model_name'):
        raise UsageError(f'--model_name={values["model_name"]} contradicts the run recorded in '
                         f'{path}, which trained {recorded.get("model_name")}; leave '
                         '--model_name out to use the run\'s')
    trained, asked = _model_shape(recorded), _model_shape(values)
    if asked != trained:
        flags = ' '.join(f'--{name}={values.get(name)}' for name in _SHAPE_FLAGS
                         if name in given)
        raise UsageError(f'{flags} gives {values["model_name"]} {asked[0]} classes and '
                         f'{asked[1]} input channels, but the run recorded in {path} trained '
                         f'it with {trained[0]} and {trained[1]}')
    return values


_SHAPE_FLAGS = ('dataset_name', 'labels_offset', 'use_grayscale', 'preprocessing_name')


def _model_shape(flags):
    """(classes, input channels) of the network that `flags` describe."""
    dataset_name = flags.get('dataset_name', run_config.DataConfig.dataset_name)
    model = run_config.ModelConfig(**{name: flags[name] for name in (
        'model_name', 'preprocessing_name', 'use_grayscale') if name in flags})
    return (run_config.num_classes(dataset_name, flags.get('labels_offset', 0)),
            run_config.input_channels(dataset_name, model))
