"""The entry scripts as a user runs them (subprocesses, no TF_CPP_MIN_LOG_LEVEL set): a
default run prints only its own lines; evaluation and export need only --checkpoint_path;
every user mistake is one line naming its flag, exit code 2, with nothing touched."""
import os
import re

import pytest

from helpers import run_script

pytestmark = pytest.mark.slow

# Our log lines: a level letter and the time
# (slim_deploy.image_classifier.verbosity.configure_logging).
OUR_LINE = re.compile(r'^[IWE] \d\d:\d\d:\d\d ')


@pytest.fixture(scope='module')
def trained(digits_dir, tmp_path_factory):
    """(train_dir, stderr) of a default training run, shortened to 20 steps."""
    train_dir = tmp_path_factory.mktemp('train')
    result = run_script('train_image_classifier.py', f'--train_dir={train_dir}',
                        f'--dataset_dir={digits_dir}', '--max_number_of_steps=20')
    assert result.returncode == 0, result.stderr[-3000:]
    return train_dir, result.stderr


def test_a_default_run_prints_the_plan_progress_and_result_only(trained):
    train_dir, stderr = trained
    lines = stderr.splitlines()
    plan_end = lines.index('local      /device:CPU:0  25 variables, 39.3 MB (39,295,616 bytes)')
    assert OUR_LINE.match(lines[0]) and lines[0].endswith(' Placement:')
    assert lines[1:plan_end + 1] == [
        'variables  /device:CPU:0', 'inputs     /device:CPU:0', 'optimizer  /device:CPU:0',
        'clone 0    /device:CPU:0', lines[plan_end]]
    rest = lines[plan_end + 1:]
    assert all(OUR_LINE.match(line) for line in rest), stderr
    assert rest[0][11:] == 'Global batch 32 examples per step; learning rate 0.01'
    assert [line[11:].split(':')[0] for line in rest[1:-1]] == ['step 10', 'step 20']
    assert rest[-1][11:] == (f'Finished training at global step 20 after 20 steps here; '
                             f'checkpoints in {train_dir}')


def test_evaluation_and_export_need_only_the_checkpoint_path(trained, tmp_path):
    train_dir, _ = trained
    evaluation = run_script('eval_image_classifier.py', f'--checkpoint_path={train_dir}',
                            f'--eval_dir={tmp_path / "eval"}')
    assert evaluation.returncode == 0, evaluation.stderr[-3000:]
    assert re.fullmatch(r'accuracy \d\.\d{4}  recall@5 \d\.\d{4}  examples 360  global step 20'
                        r'\n', evaluation.stdout)
    assert evaluation.stderr == ''
    exported = run_script('export_inference_graph.py', f'--checkpoint_path={train_dir}',
                          f'--saved_model_dir={tmp_path / "model"}')
    assert exported.returncode == 0, exported.stderr[-3000:]
    assert exported.stderr.splitlines()[-1].endswith(
        f'Wrote a SavedModel of {train_dir}/model.ckpt-20 to {tmp_path / "model"}')
    assert all(OUR_LINE.match(line) for line in exported.stderr.splitlines())


def test_verbosity_shows_what_tensorflow_says(digits_dir, tmp_path):
    result = run_script('train_image_classifier.py', f'--train_dir={tmp_path}',
                        f'--dataset_dir={digits_dir}', '--max_number_of_steps=1',
                        '--verbosity=1')
    assert result.returncode == 0, result.stderr[-3000:]
    assert 'Graph was finalized' in result.stderr and 'deprecated' in result.stderr


@pytest.mark.parametrize('script, args, message', [
    ('train_image_classifier.py', ['--model_name=lenet5'],
     "unknown --model_name 'lenet5'; valid: alexnet_v2, "),
    ('train_image_classifier.py', ['--dataset_name=bogus'],
     "unknown --dataset_name 'bogus'; valid: cifar10, digits, flowers, imagenet, mnist, "
     'visualwakewords'),
    ('train_image_classifier.py', ['--num_clones=abc'],
     "flag --num_clones=abc: invalid literal for int() with base 10: 'abc'"),
    ('train_image_classifier.py', ['--num_clone=2'],
     "Unknown command line flag 'num_clone'"),
    ('train_image_classifier.py', ['--batch_size=0'], '--batch_size must be an integer'
     ' in [1, 2147483647]'),
    ('train_image_classifier.py', ['--num_clones=99999999999999999999'],
     '--num_clones must be an integer in [1, 64], got 99999999999999999999'),
    ('train_image_classifier.py', ['--rmsprop_momentum=1e400'],
     '--rmsprop_momentum must be a number in [0, 1], got inf'),
    ('train_image_classifier.py', ['--model_name=vgg_a', '--train_image_size=32'],
     '--train_image_size=32 is outside the sizes vgg_a takes, 224 to 255 pixels'),
    ('train_image_classifier.py', ['--trainable_scopes=LeNet/fc9'],
     "--trainable_scopes='LeNet/fc9' matches no trainable variable"),
    ('train_image_classifier.py', ['--num_ps_tasks=1'],
     '--num_ps_tasks=1 needs a cluster of ps tasks'),
    ('eval_image_classifier.py', ['--checkpoint_path=/nonexistent/model.ckpt-1'],
     "--checkpoint_path '/nonexistent/model.ckpt-1' is neither a checkpoint"),
    ('eval_image_classifier.py', ['--checkpoint_path={train_dir}', '--model_name=cifarnet'],
     '--model_name=cifarnet contradicts the run recorded in {train_dir}/run_config.json, '
     'which trained lenet'),
    ('export_inference_graph.py', [], 'nothing to export: pass --output_file, '
                                      '--saved_model_dir and/or --tflite_file'),
    ('download_and_convert_data.py', ['--dataset_name=svhn'], "unknown --dataset_name 'svhn'"),
])
def test_a_mistake_is_one_line_naming_the_flag(script, args, message, trained, digits_dir,
                                               tmp_path):
    train_dir, _ = trained
    sentinel = tmp_path / 'keep.txt'
    sentinel.write_text('user data')
    base = {'train_image_classifier.py': [f'--train_dir={tmp_path}',
                                          f'--dataset_dir={digits_dir}'],
            'eval_image_classifier.py': [f'--eval_dir={tmp_path}', f'--dataset_dir={digits_dir}'],
            }.get(script, [])
    result = run_script(script, *base, *(arg.format(train_dir=train_dir) for arg in args))
    assert result.returncode == 2
    assert result.stderr.startswith(f'{script}: error: {message.format(train_dir=train_dir)}')
    assert result.stderr.count('\n') == 1 and result.stdout == ''
    assert os.listdir(tmp_path) == ['keep.txt']
