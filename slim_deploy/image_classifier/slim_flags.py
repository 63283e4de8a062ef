"""Slim's flags, defined from the run configs' settings, and the run configs built from
the flags a user gave.

Every flag is a field of a config group (config.py) with its default and help there, so a
flag that training and evaluation share is defined once, the same way; only the defaults
of the two run configs may differ (eval's batch_size is 100, as in slim).
"""
import os
import sys

from absl import flags

from slim_deploy.image_classifier import config, run_record

FLAGS = flags.FLAGS

_DEFINE = {int: flags.DEFINE_integer, float: flags.DEFINE_float, str: flags.DEFINE_string,
           bool: flags.DEFINE_boolean}


def define(config_class, module_name, flag_values=FLAGS):
    """Defines a flag for every setting of `config_class` (TrainConfig, EvalConfig or
    ExportConfig), with the setting's default and help, as key flags of module
    `module_name` (the entry script: its --help lists them), and its aliases."""
    if module_name == '__main__':  # absl names a script's module by its path.
        module_name = sys.argv[0]
    for name, default, kind, help_text in config.flag_settings(config_class,
                                                               config_class.RENAMED):
        _DEFINE[kind](name, default, help_text, flag_values=flag_values)
        flag_values.register_key_flag_for_module(module_name, flag_values[name])
    for alias, name in config.flag_aliases(config_class).items():
        flags.DEFINE_alias(alias, name, flag_values=flag_values)


def given(config_class, flag_values=FLAGS):
    """{flag: value} of the settings of `config_class` set on the command line."""
    return {name: flag_values[name].value
            for name, *_ in config.flag_settings(config_class, config_class.RENAMED)
            if flag_values[name].present}


def train_config(flag_values=FLAGS, environ=os.environ):
    """The TrainConfig of the flags given and the environment variables TF_CONFIG and
    JOB_COMPLETION_INDEX (config.ClusterConfig)."""
    return config.TrainConfig.from_flags({
        **given(config.TrainConfig, flag_values), 'tf_config': environ.get('TF_CONFIG'),
        'job_completion_index': environ.get('JOB_COMPLETION_INDEX')})


def eval_config(flag_values=FLAGS):
    """The EvalConfig of the flags given, the others defaulting to the run that wrote
    --checkpoint_path (see run_record.with_run_defaults)."""
    values = given(config.EvalConfig, flag_values)
    return run_record.eval_config(values.pop('checkpoint_path', config.EvalConfig.checkpoint_path),
                                  **values)


def export_config(flag_values=FLAGS):
    """The ExportConfig of the flags given, the others defaulting to the run that wrote
    --checkpoint_path, if it is given."""
    values = given(config.ExportConfig, flag_values)
    if values.get('checkpoint_path'):
        return run_record.export_config(values.pop('checkpoint_path'), **values)
    return config.ExportConfig.from_flags(values)
