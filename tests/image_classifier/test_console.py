"""What an entry point prints: slim_deploy.image_classifier.verbosity and
slim_deploy.image_classifier.cli, through real subprocesses of small programs (real TensorFlow,
real absl), run without TF_CPP_MIN_LOG_LEVEL."""
import os
import re
import subprocess
import sys
import textwrap

import pytest

from slim_deploy.image_classifier import verbosity

from helpers import REPO

CPP_INFO_LINE = re.compile(r'^I\d{4} \d\d:\d\d:\d+\.\d+ +\d+ \S+:\d+\] ', re.MULTILINE)
ABSL_PREINIT = 'All log messages before absl::InitializeLog() is called'

# An entry script in miniature: main does TensorFlow work that makes TensorFlow talk, unless
# --then asks it to fail first.
SCRIPT = '''
from slim_deploy.image_classifier import verbosity
verbosity.start()  # Before TensorFlow is imported.

from absl import flags, logging
import tensorflow.compat.v1 as tf
import tf_slim as slim

from slim_deploy.common.errors import UsageError
from slim_deploy.image_classifier import cli

flags.DEFINE_integer('num_clones', 1, 'Number of clones.')
flags.DEFINE_enum('then', 'work', ['work', 'usage_error', 'crash'], 'What main does.')
FLAGS = flags.FLAGS


def main(argv):
    if FLAGS.then == 'usage_error':
        raise UsageError('--num_clones must be at least 1, not 0')
    if FLAGS.then == 'crash':
        raise RuntimeError('a bug')
    tf.disable_eager_execution()
    logits = slim.fully_connected(slim.flatten(tf.ones([2, 3, 3, 1])), 2)  # UserWarnings
    scale = tf.get_variable(  # A deprecation notice through TensorFlow's logger.
        'scale', [2], initializer=tf.ones_initializer(dtype=tf.float32))
    with tf.Session() as session:
        session.run(tf.global_variables_initializer())
        logging.info('logits shape = %s', session.run(logits * scale).shape)
    tf.get_logger().info('TensorFlow info')
    tf.get_logger().warning('TensorFlow warning')


if __name__ == '__main__':
    cli.run(main, __name__)
'''

# SCRIPT, with a meta path finder that writes what a failing library would while start()
# imports TensorFlow: a C++ error and a C++ warning to file descriptor 2, a Python line to
# sys.stderr.
LOUD_SCRIPT = '''
import os
import sys


class LoudImport:
    def find_spec(self, name, path=None, target=None):
        if name == 'tensorflow':  # Imported once, by verbosity.start().
            os.write(2, b'E0101 00:00:1795404029.804776    6624 loader.cc:12] real C++ error\\n')
            os.write(2, b'W0101 00:00:1795404029.804776    6624 loader.cc:13] C++ warning\\n')
            print('real Python error', file=sys.stderr)


sys.meta_path.insert(0, LoudImport())
''' + SCRIPT


def run_python(tmp_path, source, *args, **environ):
    """Runs `source` as tmp_path/program.py with `args`, without TF_CPP_MIN_LOG_LEVEL and
    PYTHONWARNINGS unless given in `environ`; returns the CompletedProcess."""
    (tmp_path / 'program.py').write_text(textwrap.dedent(source))
    env = {key: value for key, value in os.environ.items()
           if key not in ('TF_CPP_MIN_LOG_LEVEL', 'PYTHONWARNINGS')}
    env.update(PYTHONPATH=REPO, **environ)
    return subprocess.run([sys.executable, 'program.py', *args], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300, env=env)


@pytest.mark.slow
def test_a_default_run_shows_its_own_lines_and_errors_only(tmp_path):
    result = run_python(tmp_path, LOUD_SCRIPT)
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    assert re.fullmatch(r'I \d\d:\d\d:\d\d logits shape = \(2, 2\)', lines[-2])
    assert re.fullmatch(r'W \d\d:\d\d:\d\d TensorFlow warning', lines[-1])
    assert 'E0101 00:00:1795404029.804776    6624 loader.cc:12] real C++ error' in lines
    assert 'real Python error' in lines
    assert len(lines) == 4, result.stderr  # No C++ warning, no info, nothing deprecated.


@pytest.mark.slow
def test_verbosity_1_shows_what_tensorflow_prints(tmp_path):
    result = run_python(tmp_path, LOUD_SCRIPT, '--verbosity=1')
    assert result.returncode == 0, result.stderr
    assert ABSL_PREINIT in result.stderr
    assert CPP_INFO_LINE.search(result.stderr)
    assert 'W0101 00:00:1795404029.804776    6624 loader.cc:13] C++ warning' in result.stderr
    assert 'UserWarning: `layer.apply` is deprecated' in result.stderr
    assert re.search(r'^W \d\d:\d\d:\d\d From .*: calling Ones.__init__ .* is deprecated',
                     result.stderr, re.MULTILINE)
    assert re.search(r'^I \d\d:\d\d:\d\d TensorFlow info$', result.stderr, re.MULTILINE)
    assert result.stderr.count('TensorFlow warning') == 1


@pytest.mark.slow
def test_tf_cpp_min_log_level_from_the_environment_rules_cpp_output(tmp_path):
    result = run_python(tmp_path, SCRIPT, TF_CPP_MIN_LOG_LEVEL='0')
    assert result.returncode == 0, result.stderr
    assert ABSL_PREINIT in result.stderr
    assert CPP_INFO_LINE.search(result.stderr)
    assert 'deprecated' not in result.stderr  # Python's side stays quiet.


def test_a_failing_tensorflow_import_shows_all_it_wrote(tmp_path):
    result = run_python(tmp_path, '''
        import os
        import sys


        class BrokenImport:
            def find_spec(self, name, path=None, target=None):
                if name == 'tensorflow':
                    os.write(2, b'W0101 00:00:1795404029.804776    6624 dso.cc:1] no libfoo.so\\n')
                    raise ImportError('no tensorflow today')


        sys.meta_path.insert(0, BrokenImport())
        from slim_deploy.image_classifier import verbosity
        verbosity.start()
        ''')
    assert result.returncode == 1
    assert 'W0101 00:00:1795404029.804776    6624 dso.cc:1] no libfoo.so\n' in result.stderr
    assert 'Traceback' in result.stderr
    assert result.stderr.endswith('ImportError: no tensorflow today\n')


@pytest.mark.slow
def test_a_usage_error_ends_in_one_line_and_exit_code_2(tmp_path):
    result = run_python(tmp_path, SCRIPT, '--then=usage_error')
    assert result.returncode == 2
    assert result.stderr == 'program.py: error: --num_clones must be at least 1, not 0\n'


@pytest.mark.slow
@pytest.mark.parametrize('argument, message', [
    ('--num_clones=abc', "flag --num_clones=abc: invalid literal for int() with base 10: 'abc'"),
    ('--then=explode', 'flag --then=explode: value should be one of <work|usage_error|crash>'),
    ('--num_clone=2', "Unknown command line flag 'num_clone'. Did you mean: num_clones ?"),
])
def test_a_bad_flag_ends_in_one_line_and_exit_code_2(tmp_path, argument, message):
    result = run_python(tmp_path, SCRIPT, argument)
    assert result.returncode == 2
    assert result.stderr == f'program.py: error: {message}\n'


@pytest.mark.slow
def test_any_other_exception_keeps_its_traceback(tmp_path):
    result = run_python(tmp_path, SCRIPT, '--then=crash')
    assert result.returncode == 1
    assert 'Traceback' in result.stderr
    assert result.stderr.endswith('RuntimeError: a bug\n')


@pytest.mark.slow
def test_help_lists_the_module_flags_when_another_file_runs_it(tmp_path):
    """As for an installed console command: argv[0] is not the module that defines the flags."""
    (tmp_path / 'script.py').write_text(textwrap.dedent(SCRIPT))
    result = run_python(tmp_path, '''
        import script
        from slim_deploy.image_classifier import cli
        cli.run(script.main, 'script')
        ''', '--help')
    assert '--num_clones: Number of clones.' in result.stdout
    assert '--then: <work|usage_error|crash>: What main does.' in result.stdout


def test_importing_quiet_imports_no_tensorflow_absl_or_numpy(tmp_path):
    result = run_python(tmp_path, '''
        import sys
        from slim_deploy.image_classifier import verbosity
        print(sorted({'tensorflow', 'absl', 'numpy'} & set(sys.modules)))
        ''')
    assert result.stdout == '[]\n', result.stderr


@pytest.mark.parametrize('argv, level', [
    ([], 0),
    (['--verbosity=1'], 1),
    (['--verbosity', '2'], 2),
    (['-v=1'], 1),
    (['-v', '-1'], -1),
    (['--v=3', '--train_dir=/tmp'], 3),
    (['--verbosity=1', '--verbosity=0'], 0),
    (['--', '--verbosity=1'], 0),
    (['--verbosity=debug'], 0),
    (['--verbosity_x=1', '-vv=1'], 0),
])
def test_verbosity_in_reads_absl_forms_of_the_flag(argv, level):
    assert verbosity.verbosity_in(argv) == level


# Measured on a machine without a GPU: TensorFlow 2.21's stderr while importing and listing GPUs.
STARTUP = '''\
WARNING: All log messages before absl::InitializeLog() is called are written to STDERR
I0000 00:00:1795404026.292158    6624 cudart_stub.cc:31] Could not find cuda drivers on your machine, GPU will not be used.
I0000 00:00:1795404026.347752    6624 cpu_feature_guard.cc:227] This TensorFlow binary is optimized to use available CPU instructions in performance-critical operations.
To enable the following instructions: AVX2 FMA, in other operations, rebuild TensorFlow with the appropriate compiler flags.
E0000 00:00:1795404029.804776    6624 cuda_platform.cc:52] failed call to cuInit: INTERNAL: CUDA error: Failed call to cuInit: UNKNOWN ERROR (303)
'''  # noqa: E501
CUINIT = STARTUP.splitlines(keepends=True)[-1]


def test_drop_startup_noise_drops_the_measured_startup_lines():
    assert verbosity.drop_startup_noise(STARTUP) == ''


def test_drop_startup_noise_keeps_a_cuinit_failure_when_a_driver_was_found():
    without_driver = STARTUP.replace('Could not find cuda drivers', '')
    assert verbosity.drop_startup_noise(without_driver) == CUINIT


def test_drop_startup_noise_keeps_other_lines():
    error = 'E0000 00:00:1795404026.292158    6624 env.cc:1] cannot open file\n'
    text = f'{error}Fatal Python error: Aborted\nlibfoo.so: cannot open shared object file'
    assert verbosity.drop_startup_noise(STARTUP + text) == text
