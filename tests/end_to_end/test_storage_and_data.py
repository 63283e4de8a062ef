"""Storage and data that fail under a run, as a user meets them with the entry points: a full
disk (a real tmpfs) under training, evaluation and export; a run directory moved elsewhere;
a torn shard; a corrupt record; directories and checkpoints that cannot be used. Each ends
in one line with its documented exit code, and nothing is lost."""
import os
import shutil

import pytest

from slim_deploy.common.errors import DataError, StorageError, UsageError
from slim_deploy.datasets import manifest
from slim_deploy.image_classifier import evaluate

from helpers import TRAIN, checkpoint_step, fill, run, run_script, tmpfs, train_args
from raw_datasets import replace_image

pytestmark = pytest.mark.slow
SHARD = 'digits_train_00001-of-00004.tfrecord'
# Root, without the capabilities that let it read and write whatever the permissions say.
AS_A_USER = ['setpriv', '--bounding-set=-dac_override,-dac_read_search']


def train(train_dir, digits_dir, steps, *extra, as_a_user=False):
    """Runs train_image_classifier (as AS_A_USER with `as_a_user`) on the digits in
    digits_dir; returns its CompletedProcess."""
    return run([*(AS_A_USER if as_a_user else []), *TRAIN,
                *train_args(train_dir, digits_dir, steps, *extra)])


def assert_one_line(result, exit_code, line):
    """`result` (a CompletedProcess) ended with `exit_code` and `line` on stderr, no
    traceback."""
    assert result.returncode == exit_code, result.stderr[-3000:]
    assert 'Traceback' not in result.stderr, result.stderr[-3000:]
    assert result.stderr.splitlines()[-1] == line


@pytest.fixture
def digits_copy(digits_dir, tmp_path):
    return str(shutil.copytree(digits_dir, tmp_path / 'digits'))


def test_a_full_disk_ends_training_in_one_line_and_a_rerun_with_room_resumes(
        digits_dir, tmp_path):
    with tmpfs(tmp_path / 'disk', '100m') as disk:
        train_dir = disk / 'run'
        fill(disk, 45 * 2**20)  # Room for one of lenet's 38 MB checkpoints, not two.
        result = train(train_dir, digits_dir, 2000, '--save_interval_secs=1')
        assert result.returncode == StorageError.exit_code, result.stderr[-3000:]
        last = result.stderr.splitlines()[-1]
        assert last.startswith('train_image_classifier.py: error: Cannot save the checkpoint '
                               'of step ')
        assert f' in {train_dir}: no space left on the device (needs about 38 MB, ' in last
        assert last.endswith(' MB free); the newest complete checkpoint is step 0: a rerun '
                             'with room resumes from it')
        assert 'Traceback' not in result.stderr
        assert not [name for name in os.listdir(train_dir) if 'temp' in name]
        assert checkpoint_step(train_dir) == 0
        os.remove(disk / 'filler')
        resumed = train(train_dir, digits_dir, 30)
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        assert f'Resuming from {train_dir}/model.ckpt-0' in resumed.stderr
        assert checkpoint_step(train_dir) == 30


def test_evaluation_and_export_on_a_full_disk_end_in_one_line(digits_dir, tmp_path):
    train_dir = tmp_path / 'run'
    assert train(train_dir, digits_dir, 5).returncode == 0
    with tmpfs(tmp_path / 'disk', '1m') as disk:
        fill(disk, 0)
        result = run_script('eval_image_classifier.py', f'--checkpoint_path={train_dir}',
                            f'--eval_dir={disk}/eval')
        assert_one_line(result, StorageError.exit_code,
                        f'eval_image_classifier.py: error: Cannot write the metrics in '
                        f'{disk}/eval: no space left on the device (0.0 MB free); nothing was '
                        'written')
        result = run_script('export_inference_graph.py', f'--checkpoint_path={train_dir}',
                            f'--output_file={disk}/lenet.pb')
        assert_one_line(result, StorageError.exit_code,
                        f'export_inference_graph.py: error: Cannot write lenet.pb in {disk}: no '
                        'space left on the device (0.0 MB free); nothing of it is left')
        assert sorted(os.listdir(disk)) == ['eval', 'filler']
        assert evaluate.METRICS_FILENAME not in os.listdir(disk / 'eval')


def test_a_run_directory_moved_elsewhere_resumes_there(digits_dir, tmp_path):
    first, moved = tmp_path / 'first', tmp_path / 'elsewhere' / 'run'
    assert train(first, digits_dir, 20).returncode == 0
    shutil.copytree(first, moved)
    shutil.rmtree(first)
    result = train(moved, digits_dir, 30)
    assert result.returncode == 0, result.stderr[-3000:]
    assert f'Resuming from {moved}/model.ckpt-20' in result.stderr
    assert checkpoint_step(moved) == 30
    evaluated = run_script('eval_image_classifier.py', f'--checkpoint_path={moved}',
                           f'--eval_dir={moved}/eval')
    assert evaluated.returncode == 0, evaluated.stderr[-3000:]


def test_a_torn_shard_ends_training_in_one_line_naming_it(digits_copy, tmp_path):
    shard = os.path.join(digits_copy, SHARD)
    size = os.path.getsize(shard)
    with open(shard, 'r+b') as f:
        f.truncate(size // 2)
    assert_one_line(train(tmp_path / 'run', digits_copy, 20), DataError.exit_code,
                    f'train_image_classifier.py: error: shard {shard} is {size // 2} bytes '
                    f'where manifest.json says {size}: torn or replaced; restore it or convert '
                    'the dataset again')


def test_a_corrupt_record_ends_training_unless_max_bad_records_skips_it(digits_copy, tmp_path):
    shard = os.path.join(digits_copy, SHARD)
    replace_image(shard, 17, b'not an image')
    manifest.write(digits_copy, [shard])
    cause = 'Unknown image file format. One of JPEG, JPEG XL, PNG, GIF, BMP, WebP required.'
    # Seeded, the records come in the same order every time: record 17 of that shard within
    # 200 steps of 16.
    assert_one_line(train(tmp_path / 'run', digits_copy, 200, '--seed=1'), DataError.exit_code,
                    f'train_image_classifier.py: error: record 17 of shard {shard} does not '
                    f'decode ({cause}); --max_bad_records=N skips up to N')
    result = train(tmp_path / 'run2', digits_copy, 200, '--seed=1', '--max_bad_records=1')
    assert result.returncode == 0, result.stderr[-3000:]
    assert (f'Skipped record 17 of shard {shard} ({cause}): 1 of --max_bad_records=1'
            in result.stderr)
    assert '(1 bad records skipped (--max_bad_records=1))' in result.stderr
    assert checkpoint_step(tmp_path / 'run2') == 200


def test_directories_and_checkpoints_that_cannot_be_used_are_named(digits_copy, tmp_path):
    os.chmod(digits_copy, 0)
    assert_one_line(train(tmp_path / 'run', digits_copy, 5, as_a_user=True),
                    UsageError.exit_code,
                    f"train_image_classifier.py: error: --dataset_dir '{digits_copy}' cannot be "
                    'read (permission denied)')
    os.chmod(digits_copy, 0o755)
    (tmp_path / 'read-only').mkdir(mode=0o555)
    assert_one_line(train(tmp_path / 'read-only', digits_copy, 5, as_a_user=True),
                    UsageError.exit_code,
                    f"train_image_classifier.py: error: --train_dir '{tmp_path}/read-only' is "
                    'not a writable directory: Permission denied')
    assert train(tmp_path / 'run', digits_copy, 5).returncode == 0
    os.remove(tmp_path / 'run' / 'model.ckpt-5.data-00000-of-00001')
    result = run_script('eval_image_classifier.py', f'--checkpoint_path={tmp_path}/run',
                        f'--eval_dir={tmp_path}/eval')
    assert_one_line(result, UsageError.exit_code,
                    f"eval_image_classifier.py: error: --checkpoint_path '{tmp_path}/run': the "
                    f"checkpoint's data file {tmp_path}/run/model.ckpt-5.data-00000-of-00001 is "
                    'missing')
