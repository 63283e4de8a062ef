r"""Checks that a net deployed as N clones trains as one clone on the same global batch.

    python check_equivalence.py --model_name=lenet --num_clones=2
    python check_equivalence.py --model_name=mobilenet_v1 --sync_batch_norm \
        --variable_update=collective --num_workers=2
    python check_equivalence.py --model_name=cifarnet --gradient_accumulation_steps=4
    python check_equivalence.py --variable_update=collective --gradient_compression=bfloat16

Builds --model_name (training mode, dropout off, 10 classes, --weight_decay) twice from the
same initial values: deployed as --num_clones clones on as many CPU devices (x --num_workers
collective workers, in threads of this process talking gRPC over 127.0.0.1; x
--gradient_accumulation_steps micro-batches of --batch_size examples per clone), and as one
clone on the whole global batch. Both take one SGD step on seeded random images of
--image_size (default: the net's default size) and random labels. Prints, for the loss, the
gradients and the updated variables, the largest absolute and relative differences and
where, and the largest relative noise: how far the single clone lands from itself on the
same batch reordered (float32 round-off, large in deep nets with batch norm); then the
verdict. A difference passes within --atol + --rtol x the reference's size + --noise_margin
x the noise; with --gradient_compression (collective workers exchanging 16-bit gradients)
--rtol defaults to their round-off (equivalence.compression_rtol). The work is
slim_deploy.analysis.equivalence.check.

Exit code: 0 'equivalent'; 1 'NOT equivalent' (a bug: the worst variable is named); 3 'NOT
equivalent, as expected': the net has batch norm and the clones' batches are not the global
batch (no --sync_batch_norm, or micro-batches), so it cannot agree: no verdict on the
deployment (--sync_batch_norm without micro-batches gives one); 2 a bad flag.
"""
from slim_deploy.image_classifier import verbosity

verbosity.start()  # Before TensorFlow is imported.

import inspect  # noqa: E402
import math  # noqa: E402

from absl import flags  # noqa: E402
import numpy as np  # noqa: E402

from slim_deploy.analysis import equivalence  # noqa: E402
from slim_deploy.common.errors import UsageError  # noqa: E402
from slim_deploy.deployment import compression, model_deploy, setting_rules  # noqa: E402
from slim_deploy.image_classifier import builders, cli, config  # noqa: E402
from slim_deploy.nets import nets_factory  # noqa: E402

FLAGS = flags.FLAGS
NUM_CLASSES = 10
EXIT_EXPECTED = 3  # Exit code of a difference batch norm explains.

flags.DEFINE_string('model_name', 'lenet', 'Network to check: a name of nets_factory.')
flags.DEFINE_integer('num_clones', 2, 'Clones per worker, each on its own CPU device.',
                     lower_bound=1)
flags.DEFINE_string('variable_update', 'parameter_server',
                    f'How the clones share variables: {", ".join(model_deploy.VARIABLE_UPDATES)}.')
flags.DEFINE_boolean('sync_batch_norm', False,
                     'Batch norm normalizes with the moments of the global batch.')
flags.DEFINE_integer('gradient_accumulation_steps', 1,
                     'Micro-batches (session runs) per update.', lower_bound=1)
flags.DEFINE_integer('batch_size', 2, 'Examples per clone and micro-batch.', lower_bound=1)
flags.DEFINE_integer('image_size', None, "Height and width of the images, pixels; default: "
                     "the net's default size.", lower_bound=1)
flags.DEFINE_integer('num_workers', 2, 'Workers of --variable_update=collective (only).',
                     lower_bound=1)
flags.DEFINE_float('weight_decay', 0.00004, 'L2 weight decay of the model.', lower_bound=0)
flags.DEFINE_integer('seed', 0, 'Seed of the initial values, images and labels.')
flags.DEFINE_enum('gradient_compression', 'none', list(compression.COMPRESSIONS),
                  'The dtype collective workers exchange gradients in (none: float32).')
flags.DEFINE_float('rtol', None, 'Allowed difference relative to the size of the single '
                   "clone's loss, gradient or variable change; default "
                   f'{equivalence.RTOL:g}, or with --gradient_compression its round-off.',
                   lower_bound=0)
flags.DEFINE_float('atol', equivalence.ATOL, 'Allowed absolute difference.', lower_bound=0)
flags.DEFINE_float('noise_margin', equivalence.NOISE_MARGIN,
                   'Allowed difference in multiples of the noise.', lower_bound=0)
for _name in ('weight_decay', 'rtol', 'atol', 'noise_margin'):
    flags.register_validator(_name, lambda value: value is None or math.isfinite(value),
                             message=f'--{_name} must be finite')


def workers():
    """The number of workers the flags ask for; UsageError when --num_workers does not fit
    --variable_update."""
    variable_update = model_deploy.VARIABLE_UPDATES.check(FLAGS.variable_update)
    problem = setting_rules.gradient_compression_problem(
        FLAGS.gradient_compression, variable_update, 0, lambda name, value: f'--{name}={value}',
        ps_tasks_possible=False)  # The check runs no ps tasks.
    if problem:
        raise UsageError(problem)
    if variable_update != 'collective':
        if FLAGS['num_workers'].present:
            raise UsageError(f'--num_workers applies to --variable_update=collective only, '
                             f'not to --variable_update={variable_update}')
        return 1
    problem = setting_rules.variable_update_problem(
        variable_update, FLAGS.num_workers, 0,
        lambda name, value: f'--{"num_workers" if name == "num_replicas" else name}={value}')
    if problem:
        raise UsageError(problem)
    return FLAGS.num_workers


def rtol(num_workers):
    """--rtol, or its default: equivalence.RTOL, or with --gradient_compression the
    round-off of the clones' 16-bit sum."""
    if FLAGS.rtol is not None:
        return FLAGS.rtol
    return equivalence.compression_rtol(FLAGS.gradient_compression,
                                        FLAGS.num_clones * num_workers)


def classifier_fn(model_name, image_size):
    """model_fn(images, labels) for equivalence.check: the net, without dropout, and its
    classification losses; and the size of its images: image_size, None for the net's
    default. UsageError for a net that takes videos or not that size."""
    network = nets_factory.NETWORKS[model_name]
    if network.preprocessing == 'video':
        raise UsageError(f'--model_name {model_name!r} takes videos; this check feeds images')
    size = image_size or network.default_image_size
    config.check_image_size(model_name, size, 'image_size')
    network_fn = nets_factory.get_network_fn(model_name, NUM_CLASSES, FLAGS.weight_decay,
                                             is_training=True)
    no_dropout = ({'dropout_keep_prob': 1.0} if 'dropout_keep_prob' in
                  inspect.signature(network.builder).parameters else {})

    def model_fn(images, labels):
        logits, end_points = network_fn(images, **no_dropout)
        builders.add_classification_losses(logits, end_points, labels, NUM_CLASSES)

    return model_fn, size


def main(argv):
    del argv
    num_workers = workers()
    model_fn, size = classifier_fn(FLAGS.model_name, FLAGS.image_size)
    global_batch = (FLAGS.batch_size * FLAGS.num_clones * FLAGS.gradient_accumulation_steps *
                    num_workers)
    rng = np.random.RandomState(FLAGS.seed)
    images = rng.uniform(-1.0, 1.0, (global_batch, size, size, 3)).astype(np.float32)
    labels = rng.randint(NUM_CLASSES, size=global_batch).astype(np.int64)
    setup = [f'{FLAGS.num_clones} clones', f'{FLAGS.batch_size} examples each']
    if num_workers > 1:
        setup.insert(0, f'{num_workers} workers')
    if FLAGS.gradient_accumulation_steps > 1:
        setup.append(f'{FLAGS.gradient_accumulation_steps} micro-batches')
    sync = ', sync batch norm' if FLAGS.sync_batch_norm else ''
    print(f'{FLAGS.model_name}: {" x ".join(setup)} ({FLAGS.variable_update}{sync}) against '
          f'one clone on all {global_batch} examples, one SGD step from the same values')
    result = equivalence.check(
        model_fn, [images, labels], FLAGS.num_clones, FLAGS.variable_update, num_workers,
        FLAGS.sync_batch_norm, FLAGS.gradient_accumulation_steps, rtol=rtol(num_workers),
        atol=FLAGS.atol, noise_margin=FLAGS.noise_margin, seed=FLAGS.seed,
        gradient_compression=FLAGS.gradient_compression)
    print('\n'.join(equivalence.format_result(result)))
    if result.equivalent:
        return 0
    return EXIT_EXPECTED if result.expected else 1


def run():
    """Console-script entry point."""
    cli.run(main, __name__)


if __name__ == '__main__':
    run()
