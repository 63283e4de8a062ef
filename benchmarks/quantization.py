"""Slim's mobile path, measured in one run: float, post-training quantized and
quantization-aware int8 TensorFlow Lite models, and the uint8 model TF 1 clients convert from
tf.contrib.quantize's rewrite, against their float checkpoint.

    python -m benchmarks.quantization [--models lenet,mobilenet_v1_025] [--train_steps N]
        [--fine_tune_steps N] [--representative_steps 100] [--latency_rounds 200] [--json]

Each model trains on the embedded digits (8x8 PNG records in slim's format, which the
preprocessing scales to the model's input) with the toolkit's own train, export and evaluate,
rmsprop and the toolkit's defaults otherwise (the learning rate decays by 0.94 every 2 epochs):

  lenet             28x28x1, batch 32: 1000 steps at learning rate 0.01, fine-tunes 300
  mobilenet_v1_025  128x128x1 (MobileNet v1, width 0.25; inception preprocessing), batch 16:
                    3000 steps at 0.01, fine-tunes 1000; batch norm decay 0.99 (see below)

  1. trains the model in float, --train_steps;
  2. fine-tunes that checkpoint three times, --fine_tune_steps at a tenth of the learning
     rate: quantization-aware (QAT) with --quantize_delay=0, slim's MobileNet recipe for a
     trained float model (weights per channel, for int8); in float, the same steps, which is
     the float model everything is compared with: the QAT models have no training the float
     one lacks; and quantization-aware as a TF 1 client (slim's train_image_classifier.py)
     trained: `tensorflow.contrib.quantize`'s create_training_graph(quant_delay=0) on the
     model and its losses, before the gradients (weights per tensor, for uint8), the same
     optimizer, schedule and inputs, in a loop of its own;
  3. exports the float run's float, float16, dynamic-range and int8 post-training quantized
     (PTQ, calibrated on --representative_steps training examples) models, and the QAT run's
     int8 model, all with float32 input and output (export_inference_graph --tflite_file);
     converts the TF 1 client's checkpoint to a uint8 model as TF 1 clients did: its
     evaluation graph (create_eval_graph) behind a [1, height, width, channels] input, from
     a session, inference_type tf.uint8, quantized_input_stats UINT8_INPUT_STATS (the range
     of the model's preprocessed input: [-1, 1]), uint8 input and output;
  4. scores the checkpoints, the QAT ones' quantized graphs and the QAT run's float graph
     (--noquantize: its weights without the fake quantization), and every .tflite on the
     test split, 360 examples (one is 0.28 points), with the evaluator (--tflite_file);
  5. times TensorFlow Lite's interpreter (1 thread, its default delegate, one image): a round
     invokes each model INVOKES_PER_ROUND times, the models in an order rotated each round so
     that machine noise hits all alike; per image, the median of --latency_rounds rounds.

Prints per model each variant's accuracy and its difference to the float checkpoint, in
points (and the int8 QAT model's to the QAT float graph's: what quantization alone costs);
each .tflite's size and latency; the ratios of sizes and latencies to the float
.tflite's; how the int8 QAT file's bytes divide; and each target, met or not: QAT int8 loses
at most 0.5 points, PTQ int8 at most 1.5, uint8 at most 1, each int8 model is at most 0.3 of
the float model's size and no slower. --json prints one object instead: `tensorflow`,
`cores`, `representative_steps`, `latency_rounds`, `invokes_per_round`, `seconds` (the whole
run) and `models`: {model name: {`image_shape` [height, width, channels], `batch_size`,
`train_steps`, `fine_tune_steps`, `learning_rate`, `fine_tune_learning_rate`,
`batch_norm_decay` (None: the net's), `seconds` {'train', 'float fine-tune', 'QAT
fine-tune', 'contrib QAT fine-tune'}, `test_examples`, `variants`: {'float checkpoint', 'QAT
checkpoint', 'QAT float graph', 'contrib checkpoint', 'float', 'float16', 'dynamic', 'int8
PTQ', 'int8 QAT', 'uint8 contrib': {`accuracy`, `points` (accuracy minus the float
checkpoint's, x100), and for a .tflite `size_bytes`, `latency_ms` (median per image),
`latency_quartiles_ms` [first, third]}}, `qat_quantization_points` (int8 QAT's points minus
the QAT float graph's), `ratios`: {'int8 QAT size / float size': ratio, ..., 'int8 QAT latency /
float latency': ratio, ...}, `int8_bytes` (of the int8 QAT file) {`weights` (its constant
buffers), `quantization` (its scales and zero points), `scales` (their count), `other`},
`targets`: {target: {`value`, `limit`, `met`}}}}.

mobilenet_v1_025 trains with batch norm's moving averages decaying by 0.99, not slim's 0.9997,
which is for ImageNet's hundreds of thousands of steps: after 6000 steps at 0.9997 the moving
averages still hold a sixth of their initial values, and the float checkpoint scores chance
(7.8%) with them while its batch statistics give 91.7%; evaluation, QAT's batch norm folding
and every .tflite use the moving averages. The toolkit has no flag for the decay, so this
script, which trains in its own process, builds the net in an arg_scope of that decay.

Its int8 models are about 0.36 of the float one, not a quarter: TensorFlow Lite stores a
float32 scale and an int64 zero point (12 bytes) per output channel of each convolution's
and depthwise convolution's weights and int32 biases, 24 bytes per channel where a depthwise
channel has 9 int8 weights (36 bytes in float), and the graph's fixed part (ops, tensors,
names) is a larger share of a small model; `int8_bytes` measures the division. The uint8
model has one scale per tensor.

Training is not seeded (the toolkit shuffles and crops at random), so the fine-tunes see
different batches, and a QAT model's accuracy differs from the float one's by a point or
two either way from run to run: on mobilenet_v1_025, from 1.9 points below to 1.4 above in
five runs, more than the 0.5-point target; lenet, near 99%, moves by an example. The QAT
float graph's row tells that apart from what quantization itself costs. A failure ends the
run with a one-line error and exit code 1.
"""
from slim_deploy.image_classifier import verbosity

verbosity.start()  # Before TensorFlow is imported.

import argparse  # noqa: E402
import contextlib  # noqa: E402
import dataclasses  # noqa: E402
import functools  # noqa: E402
import os  # noqa: E402
import shutil  # noqa: E402
import signal  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import tensorflow.compat.v1 as tf  # noqa: E402
from tensorflow.lite.tools import flatbuffer_utils  # noqa: E402
import tf_slim as slim  # noqa: E402

from benchmarks import harness  # noqa: E402
from benchmarks.harness import at_least, names_in  # noqa: E402
from slim_deploy.common.errors import UsageError  # noqa: E402
from slim_deploy.datasets import digits  # noqa: E402
from slim_deploy.deployment import tflite  # noqa: E402
from slim_deploy.image_classifier import (  # noqa: E402
    builders,
    evaluate,
    export,
    run_record,
    train,
)
from slim_deploy.image_classifier.config import (  # noqa: E402
    DataConfig,
    ModelConfig,
    OptimizationConfig,
    TrainConfig,
)
from slim_deploy.nets import nets_factory  # noqa: E402
from slim_deploy.training import optimization  # noqa: E402

PROG = f'python -m {__spec__.name}'  # Its usage's and error lines' program name.


@dataclasses.dataclass(frozen=True)
class Recipe:
    """How a model is trained here. image_size: pixels (None: the net's default);
    batch_size: examples per step; train_steps: of the float training; fine_tune_steps: of
    each fine-tune; learning_rate: the float training's (the fine-tunes':
    FINE_TUNE_LEARNING_RATE_FACTOR of it); batch_norm_decay: of batch norm's moving averages
    (None: the net's arg_scope's)."""
    image_size: int | None
    batch_size: int
    train_steps: int
    fine_tune_steps: int
    learning_rate: float
    batch_norm_decay: float | None = None

    @property
    def fine_tune_learning_rate(self):
        return self.learning_rate * FINE_TUNE_LEARNING_RATE_FACTOR


RECIPES = {
    'lenet': Recipe(image_size=None, batch_size=32, train_steps=1000, fine_tune_steps=300,
                    learning_rate=0.01),
    'mobilenet_v1_025': Recipe(image_size=128, batch_size=16, train_steps=3000,
                               fine_tune_steps=1000, learning_rate=0.01,
                               batch_norm_decay=0.99),
}
FINE_TUNE_LEARNING_RATE_FACTOR = 0.1
# The fine-tunes of the trained float checkpoint by train_image_classifier: (run,
# --quantize_delay, stage, how); then the TF 1 client's (CONTRIB).
FINE_TUNES = (('float', -1, 'float fine-tune', 'in float'),
              ('qat', 0, 'QAT fine-tune', 'quantization-aware'))
CONTRIB = ('contrib', 'contrib QAT fine-tune', "with tf.contrib.quantize's rewrite")
# The .tflite variants export_inference_graph writes: {name: (the run it is exported from,
# its --tflite_quantization)}; then UINT8, converted as TF 1 clients convert.
VARIANTS = {
    'float': ('float', 'float'),
    'float16': ('float', 'float16'),
    'dynamic': ('float', 'dynamic'),
    'int8 PTQ': ('float', 'int8'),
    'int8 QAT': ('qat', 'int8'),
}
UINT8 = 'uint8 contrib'
# quantized_input_stats of the uint8 model's input, (mean, std): real = (q - mean) / std,
# [-1, 1] for uint8 q, the range of both models' preprocessed images.
UINT8_INPUT_STATS = (127.5, 127.5)
# The checkpoints scored: {name: (their run, the evaluator's flags)}; the QAT runs' are scored
# quantized, the toolkit's also in float (its weights without the fake quantization).
CHECKPOINTS = {'float checkpoint': ('float', {}), 'QAT checkpoint': ('qat', {'quantize': True}),
               'QAT float graph': ('qat', {'quantize': False}),
               'contrib checkpoint': ('contrib', {'quantize': True})}
BASELINE = 'float checkpoint'  # What accuracies are compared with.
INVOKES_PER_ROUND = 10
# (target, variant, what is compared, limit, whether the value must be at least the limit).
TARGETS = [
    ('QAT int8 loses <= 0.5 points', 'int8 QAT', 'points', -0.5, True),
    ('PTQ int8 loses <= 1.5 points', 'int8 PTQ', 'points', -1.5, True),
    ('uint8 loses <= 1 point', UINT8, 'points', -1.0, True),
    ('QAT int8 size <= 0.3 x float', 'int8 QAT', 'size', 0.3, False),
    ('PTQ int8 size <= 0.3 x float', 'int8 PTQ', 'size', 0.3, False),
    ('QAT int8 latency <= float', 'int8 QAT', 'latency', 1.0, False),
    ('PTQ int8 latency <= float', 'int8 PTQ', 'latency', 1.0, False),
]


@contextlib.contextmanager
def batch_norm_decay(model_name, decay):
    """Inside the block, nets_factory builds `model_name` in its arg_scope with
    batch_norm_decay=decay (None: unchanged)."""
    original = nets_factory.arg_scopes_map[model_name]
    if decay is not None:
        nets_factory.arg_scopes_map[model_name] = functools.partial(original,
                                                                    batch_norm_decay=decay)
    try:
        yield
    finally:
        nets_factory.arg_scopes_map[model_name] = original


def train_run(train_dir, dataset_dir, model_name, recipe, steps, **flags):
    """Trains `model_name` as `recipe` says for `steps` steps into train_dir; returns the
    seconds it took."""
    started = time.monotonic()
    train.train(TrainConfig.from_flags({
        'train_dir': train_dir, 'dataset_dir': dataset_dir, 'model_name': model_name,
        'train_image_size': recipe.image_size, 'batch_size': recipe.batch_size,
        'max_number_of_steps': steps, 'log_every_n_steps': steps, **flags}))
    return time.monotonic() - started


def contrib_fine_tune(train_dir, dataset_dir, model_name, recipe, float_dir):
    """Fine-tunes float_dir's latest checkpoint for recipe.fine_tune_steps steps as a TF 1
    client (slim's train_image_classifier.py, --quantize_delay=0) trains with
    `tensorflow.contrib.quantize`: its model variables restored, create_training_graph on the
    model and its losses before the gradients, the toolkit's default optimizer, schedule and
    weight decay (train_run's) at recipe.fine_tune_learning_rate. Saves model.ckpt-<steps>
    and float_dir's run record (its model and data) in train_dir; returns the seconds it
    took."""
    from tensorflow.contrib import quantize as contrib_quantize
    started = time.monotonic()
    data = DataConfig(dataset_dir=dataset_dir, batch_size=recipe.batch_size)
    defaults = OptimizationConfig()
    model = builders.classifier(data, ModelConfig(model_name=model_name,
                                                  image_size=recipe.image_size),
                                is_training=True, weight_decay=defaults.weight_decay)
    with tf.Graph().as_default():
        global_step = tf.train.create_global_step()
        images, labels = tf.data.make_one_shot_iterator(model.training_batches(data)).get_next()
        logits, end_points = model.network_fn(images)
        builders.add_classification_losses(logits, end_points, labels, model.num_classes)
        contrib_quantize.create_training_graph(quant_delay=0)
        rate = optimization.learning_rate(
            defaults.learning_rate_decay_type, recipe.fine_tune_learning_rate, global_step,
            optimization.decay_steps(model.split.num_samples, defaults.num_epochs_per_decay,
                                     recipe.batch_size))
        train_op = slim.learning.create_train_op(
            tf.losses.get_total_loss(), optimization.optimizer(defaults.optimizer, rate),
            global_step=global_step)
        restore = slim.assign_from_checkpoint_fn(tf.train.latest_checkpoint(float_dir),
                                                 slim.get_model_variables())
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            restore(sess)
            for _ in range(recipe.fine_tune_steps):
                sess.run(train_op)
            tf.train.Saver().save(sess, os.path.join(train_dir, 'model.ckpt'), global_step)
    shutil.copy(os.path.join(float_dir, run_record.FILENAME), train_dir)
    return time.monotonic() - started


def uint8_model(checkpoint, model_name, image_shape, num_classes):
    """The uint8 TensorFlow Lite model (bytes) of `checkpoint`, of tf.contrib.quantize's
    rewrite, as TF 1 clients converted it: `model_name`'s evaluation graph behind a float32
    [1, *image_shape] placeholder 'input', its logits 'logits', rewritten by
    create_eval_graph, converted from a session with inference_type tf.uint8 and
    quantized_input_stats UINT8_INPUT_STATS."""
    from tensorflow.contrib import quantize as contrib_quantize
    with tf.Graph().as_default():
        image = tf.placeholder(tf.float32, [1, *image_shape], name='input')
        logits, _ = nets_factory.get_network_fn(model_name, num_classes)(image)
        logits = tf.identity(logits, name='logits')
        contrib_quantize.create_eval_graph()
        with tf.Session() as sess:
            tf.train.Saver().restore(sess, checkpoint)
            converter = tf.lite.TFLiteConverter.from_session(sess, [image], [logits])
            converter.inference_type = tf.uint8
            converter.quantized_input_stats = {'input': UINT8_INPUT_STATS}
            return converter.convert()


def int8_bytes(model_bytes):
    """{'weights': bytes of the constant buffers (weights and biases), 'quantization': of the
    tensors' quantization parameters (float32 scales, mins and maxes, int64 zero points),
    'scales': how many scales, 'other': the rest of the file (ops, tensors, names,
    alignment)} of a TensorFlow Lite model (bytes)."""
    model = flatbuffer_utils.convert_bytearray_to_object(bytearray(model_bytes))
    weights = sum(len(buffer.data) for buffer in model.buffers if buffer.data is not None)
    parameters = [tensor.quantization for subgraph in model.subgraphs
                  for tensor in subgraph.tensors if tensor.quantization is not None]

    def count(field):
        return sum(len(getattr(p, field)) for p in parameters if getattr(p, field) is not None)

    quantization = 4 * (count('scale') + count('min') + count('max')) + 8 * count('zeroPoint')
    return {'weights': weights, 'quantization': quantization, 'scales': count('scale'),
            'other': len(model_bytes) - weights - quantization}


def latencies(models, image_shape, rounds):
    """{name: [seconds per image of each round]} of the TensorFlow Lite models `models`
    ({name: bytes}) on one image of `image_shape` (batch 1, one interpreter thread); see
    the module docstring."""
    image = np.random.RandomState(0).uniform(-1, 1, [1, *image_shape]).astype(np.float32)
    interpreters = {}
    for name, model in models.items():
        interpreter = tf.lite.Interpreter(model_content=model, num_threads=1)
        interpreter.allocate_tensors()
        (detail,) = interpreter.get_input_details()
        interpreter.set_tensor(detail['index'], tflite.quantized(image, detail))
        for _ in range(INVOKES_PER_ROUND):  # Warm-up.
            interpreter.invoke()
        interpreters[name] = interpreter

    def measure(name):
        invoke = interpreters[name].invoke
        started = time.perf_counter()
        for _ in range(INVOKES_PER_ROUND):
            invoke()
        return (time.perf_counter() - started) / INVOKES_PER_ROUND

    return harness.rounds(models, rounds, measure)


def train_runs(model_name, recipe, dataset_dir, directory, log):
    """Trains `model_name` as `recipe` says (see the module docstring) into
    directory/model_name/{pretrained,float,qat,contrib}; returns ({run: train_dir} of the
    float and both QAT runs, {stage: seconds})."""
    runs = ('float', 'qat', CONTRIB[0])
    dirs = {run: os.path.join(directory, model_name, run) for run in ('pretrained', *runs)}
    log(f'{model_name}: training in float, {recipe.train_steps} steps')
    seconds = {'train': train_run(dirs['pretrained'], dataset_dir, model_name, recipe,
                                  recipe.train_steps, learning_rate=recipe.learning_rate)}
    for run, quantize_delay, stage, how in FINE_TUNES:
        log(f'{model_name}: fine-tuning {how}, {recipe.fine_tune_steps} steps')
        seconds[stage] = train_run(
            dirs[run], dataset_dir, model_name, recipe, recipe.fine_tune_steps,
            learning_rate=recipe.fine_tune_learning_rate, checkpoint_path=dirs['pretrained'],
            quantize_delay=quantize_delay)
    run, stage, how = CONTRIB
    log(f'{model_name}: fine-tuning {how}, {recipe.fine_tune_steps} steps')
    os.makedirs(dirs[run])
    seconds[stage] = contrib_fine_tune(dirs[run], dataset_dir, model_name, recipe,
                                       dirs['pretrained'])
    return {run: dirs[run] for run in runs}, seconds


def export_and_score(model_name, dirs, args, directory):
    """({variant: {'accuracy', and for a .tflite 'size_bytes'}}, {.tflite variant: its
    bytes}, examples scored) of the float and QAT runs in `dirs`; see the module docstring."""
    variants, models = {}, {}
    for name, (run, flags) in CHECKPOINTS.items():
        metrics = evaluate.evaluate(run_record.eval_config(
            dirs[run], eval_dir=os.path.join(directory, model_name, name), **flags))
        variants[name] = {'accuracy': metrics['accuracy']}
    for name, (run, quantization) in VARIANTS.items():
        path = os.path.join(directory, model_name, name.replace(' ', '_') + '.tflite')
        export.export(run_record.export_config(
            dirs[run], tflite_file=path, tflite_quantization=quantization,
            representative_steps=args.representative_steps))
        metrics = evaluate.evaluate(run_record.eval_config(
            dirs[run], eval_dir=os.path.join(directory, model_name, name), tflite_file=path))
        with open(path, 'rb') as f:
            models[name] = f.read()
        variants[name] = {'accuracy': metrics['accuracy'], 'size_bytes': len(models[name])}
    float_model = tflite.Model(models['float'])
    (num_classes,) = float_model.output_shapes['logits'][1:]
    models[UINT8] = uint8_model(tf.train.latest_checkpoint(dirs[CONTRIB[0]]), model_name,
                                float_model.input_shape[1:], num_classes)
    path = os.path.join(directory, model_name, UINT8.replace(' ', '_') + '.tflite')
    with open(path, 'wb') as f:
        f.write(models[UINT8])
    metrics = evaluate.evaluate(run_record.eval_config(
        dirs[CONTRIB[0]], eval_dir=os.path.join(directory, model_name, UINT8),
        tflite_file=path))
    variants[UINT8] = {'accuracy': metrics['accuracy'], 'size_bytes': len(models[UINT8])}
    return variants, models, metrics['num_examples']


def measure_model(model_name, recipe, args, dataset_dir, directory, log):
    """Trains `model_name` as `recipe` says, then exports, scores and times it as the module
    docstring says; returns its results (a JSON-able dict)."""
    with batch_norm_decay(model_name, recipe.batch_norm_decay):
        dirs, seconds = train_runs(model_name, recipe, dataset_dir, directory, log)
        log(f'{model_name}: exporting and scoring')
        variants, models, test_examples = export_and_score(model_name, dirs, args, directory)
    image_shape = tflite.Model(models['float']).input_shape[1:]
    log(f'{model_name}: timing the interpreter, {args.latency_rounds} rounds')
    for name, rounds in latencies(models, image_shape, args.latency_rounds).items():
        first, _, third = statistics.quantiles(rounds, n=4)
        variants[name].update(latency_ms=statistics.median(rounds) * 1000,
                              latency_quartiles_ms=[first * 1000, third * 1000])
    for variant in variants.values():
        variant['points'] = (variant['accuracy'] - variants[BASELINE]['accuracy']) * 100
    quantization_points = variants['int8 QAT']['points'] - variants['QAT float graph']['points']
    ratios = {}
    for measured, unit in (('size', 'size_bytes'), ('latency', 'latency_ms')):
        ratios.update(harness.ratios({name: variants[name][unit] for name in models},
                                     lambda name: ['float'], lambda name: f'{name} {measured}'))
    targets = {}
    for target, name, measured, limit, at_least_limit in TARGETS:
        value = (variants[name]['points'] if measured == 'points'
                 else ratios[f'{name} {measured} / float {measured}'])
        targets[target] = {'value': value, 'limit': limit,
                           'met': value >= limit if at_least_limit else value <= limit}
    return {
        'image_shape': list(image_shape), 'batch_size': recipe.batch_size,
        'train_steps': recipe.train_steps, 'fine_tune_steps': recipe.fine_tune_steps,
        'learning_rate': recipe.learning_rate,
        'fine_tune_learning_rate': recipe.fine_tune_learning_rate,
        'batch_norm_decay': recipe.batch_norm_decay, 'seconds': seconds,
        'test_examples': test_examples, 'variants': variants,
        'qat_quantization_points': quantization_points, 'ratios': ratios,
        'int8_bytes': int8_bytes(models['int8 QAT']), 'targets': targets,
    }


def benchmark(args, log):
    """Measures every model of args.models; returns the results as a JSON-able dict."""
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as directory:
        dataset_dir = digits.prepare(os.path.join(directory, 'digits'))
        models = {}
        for name in args.models:
            recipe = dataclasses.replace(
                RECIPES[name], train_steps=args.train_steps or RECIPES[name].train_steps,
                fine_tune_steps=args.fine_tune_steps or RECIPES[name].fine_tune_steps)
            models[name] = measure_model(name, recipe, args, dataset_dir, directory, log)
    return {'tensorflow': tf.__version__, 'cores': os.cpu_count(),
            'representative_steps': args.representative_steps,
            'latency_rounds': args.latency_rounds, 'invokes_per_round': INVOKES_PER_ROUND,
            'models': models, 'seconds': time.monotonic() - started}


def table(results):
    """The results as printable lines."""
    r = results
    lines = [f"TensorFlow {r['tensorflow']}, {r['cores']} cores; accuracy on the digits' test "
             f"split; latency per image: the interpreter, 1 thread, batch 1, median of "
             f"{r['latency_rounds']} rounds of {r['invokes_per_round']}; PTQ calibrated on "
             f"{r['representative_steps']} training examples"]
    for name, m in r['models'].items():
        seconds = m['seconds']
        lines += [
            '', f"{name} {'x'.join(map(str, m['image_shape']))}, batch {m['batch_size']}"
                + (f", batch norm decay {m['batch_norm_decay']:g}" if m['batch_norm_decay']
                   else '') + f": {m['train_steps']} steps at {m['learning_rate']:g} "
                f"({seconds['train']:.0f} s), then {m['fine_tune_steps']} at "
                f"{m['fine_tune_learning_rate']:g} in float ({seconds['float fine-tune']:.0f} "
                f"s), quantization-aware ({seconds['QAT fine-tune']:.0f} s) and with "
                f"tf.contrib.quantize's rewrite ({seconds['contrib QAT fine-tune']:.0f} s)",
            f"{'variant':<18} {'accuracy':>8} {'points':>7} {'bytes':>10} {'ms/image':>9}  "
            f"quartiles"]
        for variant, v in m['variants'].items():
            line = f"{variant:<18} {v['accuracy']:>8.2%} {v['points']:>+7.2f}"
            if 'size_bytes' in v:
                first, third = v['latency_quartiles_ms']
                line += (f" {v['size_bytes']:>10,} {v['latency_ms']:>9.3f}  "
                         f"{first:.3f}-{third:.3f}")
            lines.append(line)
        lines += [f"int8 QAT against the QAT float graph: {m['qat_quantization_points']:+.2f} "
                  'points (what quantization alone costs the QAT model)',
                  '', f"{'ratio':<38} value"]
        lines += [f'{pair:<38} {value:5.3f}' for pair, value in m['ratios'].items()]
        b = m['int8_bytes']
        float_size = m['variants']['float']['size_bytes']
        lines += ['', f"int8 QAT file: weights and biases {b['weights']:,} bytes "
                      f"({b['weights'] / float_size:.3f} of the float file), quantization "
                      f"parameters {b['quantization']:,} ({b['scales']:,} scales), other "
                      f"{b['other']:,}",
                  '', f"{'target':<30} {'value':>7} {'limit':>6}  met"]
        lines += [f"{target:<30} {t['value']:>7.3f} {t['limit']:>6g}  "
                  f"{'yes' if t['met'] else 'NO'}" for target, t in m['targets'].items()]
    lines += ['', f"run took {r['seconds']:.0f} s"]
    return lines


def parse_args(argv=None):
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    parser.add_argument('--models', type=names_in(RECIPES), default=list(RECIPES),
                        help='comma-separated: ' + ', '.join(RECIPES) + ' (default all)')
    parser.add_argument('--train_steps', type=at_least(1),
                        help="float training steps (default: each model's recipe)")
    parser.add_argument('--fine_tune_steps', type=at_least(1),
                        help="steps of each fine-tune, float and quantization-aware (default: "
                             "each model's recipe)")
    parser.add_argument('--representative_steps', type=at_least(1), default=100,
                        help='training examples that calibrate PTQ (default 100)')
    parser.add_argument('--latency_rounds', type=at_least(2), default=200,
                        help='rounds of interpreter invokes; medians are reported (default 200)')
    parser.add_argument('--json', action='store_true',
                        help='print one JSON object instead of the table')
    return parser.parse_args(argv)


def main():
    args = parse_args()
    verbosity.configure_logging(0)
    harness.exit_on_sigterm()
    try:
        result = benchmark(args, lambda line: print(line, file=sys.stderr, flush=True))
    except (harness.BenchmarkError, UsageError) as e:
        print(f'{PROG}: error: {e}', file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 128 + signal.SIGINT
    harness.print_result(result, table(result), args.json)
    return 0


if __name__ == '__main__':
    sys.exit(main())
