"""The GAN networks (slim_deploy/nets/pix2pix.py, cyclegan.py, dcgan.py) as TF-Slim's
research/slim has them: public names and signatures, variable names and shapes, end
points, output shapes and op names, the documented parameters and the errors.

Graphs are built in a private tf.Graph, so eager mode stays on; narrow nets on small
images, run only where the numbers matter.
"""
import inspect

import numpy as np
import pytest
import tensorflow.compat.v1 as tf
import tf_slim as slim

from slim_deploy.nets import cyclegan, dcgan, pix2pix

from helpers import variable_shapes

EMPTY = inspect.Parameter.empty
SIGNATURES = {
    pix2pix.pix2pix_arg_scope: {},
    pix2pix.upsample: {'net': EMPTY, 'num_outputs': EMPTY, 'kernel_size': EMPTY,
                       'method': 'nn_upsample_conv'},
    pix2pix.pix2pix_generator: {'net': EMPTY, 'num_outputs': EMPTY, 'blocks': None,
                                'upsample_method': 'nn_upsample_conv', 'is_training': False},
    pix2pix.pix2pix_discriminator: {'net': EMPTY, 'num_filters': EMPTY, 'padding': 2,
                                    'pad_mode': 'REFLECT', 'activation_fn': tf.nn.leaky_relu,
                                    'is_training': False},
    cyclegan.cyclegan_arg_scope: {'instance_norm_center': True, 'instance_norm_scale': True,
                                  'instance_norm_epsilon': 0.001, 'weights_init_stddev': 0.02,
                                  'weight_decay': 0.0},
    cyclegan.cyclegan_upsample: {'net': EMPTY, 'num_outputs': EMPTY, 'stride': EMPTY,
                                 'method': 'conv2d_transpose', 'pad_mode': 'REFLECT',
                                 'align_corners': False},
    cyclegan.cyclegan_generator_resnet: {
        'images': EMPTY, 'arg_scope_fn': cyclegan.cyclegan_arg_scope, 'num_resnet_blocks': 6,
        'num_filters': 64, 'upsample_fn': cyclegan.cyclegan_upsample, 'kernel_size': 3,
        'tanh_linear_slope': 0.0, 'is_training': False},
    dcgan.discriminator: {'inputs': EMPTY, 'depth': 64, 'is_training': True, 'reuse': None,
                          'scope': 'Discriminator', 'fused_batch_norm': False},
    dcgan.generator: {'inputs': EMPTY, 'depth': 64, 'final_size': 32, 'num_outputs': 3,
                      'is_training': True, 'reuse': None, 'scope': 'Generator',
                      'fused_batch_norm': False},
}


def test_public_names_and_signatures_are_slims():
    for function, signature in SIGNATURES.items():
        parameters = inspect.signature(function).parameters.items()
        assert {name: p.default for name, p in parameters} == signature, function.__name__
    assert pix2pix.Block._fields == ('num_filters', 'decoder_keep_prob')
    assert pix2pix._default_generator_blocks() == [  # Slim's own tests use it.
        (64, 0.5), (128, 0.5), (256, 0.5), (512, 0), (512, 0), (512, 0), (512, 0)]


def _evaluate(tensors, runs=1):
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        return [sess.run(tensors) for _ in range(runs)]


def _instance_norm(layer, depth):
    return {f'{layer}/InstanceNorm/beta': [depth], f'{layer}/InstanceNorm/gamma': [depth]}


def _biases(layer, depth):
    return {f'{layer}/biases': [depth]}


# pix2pix.
SMALL_BLOCKS = [pix2pix.Block(4, 0.5), pix2pix.Block(8, 0.5), pix2pix.Block(8, 0)]
# The generator with SMALL_BLOCKS on 3 channels to 5: the first and last encoder layers
# and the output have biases, the others instance norm; each decoder layer after the
# first also takes the mirrored encoder output (8 + 8, then 8 + 4 channels).
GENERATOR_VARIABLES = {
    'encoder/Conv/weights': [4, 4, 3, 4], **_biases('encoder/Conv', 4),
    'encoder/Conv_1/weights': [4, 4, 4, 8], **_instance_norm('encoder/Conv_1', 8),
    'encoder/Conv_2/weights': [4, 4, 8, 8], **_biases('encoder/Conv_2', 8),
    'decoder/Conv/weights': [4, 4, 8, 8], **_instance_norm('decoder/Conv', 8),
    'decoder/Conv_1/weights': [4, 4, 16, 8], **_instance_norm('decoder/Conv_1', 8),
    'decoder/Conv_2/weights': [4, 4, 12, 4], **_instance_norm('decoder/Conv_2', 4),
    'output/Conv/weights': [4, 4, 4, 5], **_biases('output/Conv', 5),
}


def test_pix2pix_generator_is_a_unet():
    with tf.Graph().as_default(), slim.arg_scope(pix2pix.pix2pix_arg_scope()):
        logits, end_points = pix2pix.pix2pix_generator(tf.zeros([2, 16, 24, 3]), 5,
                                                       SMALL_BLOCKS)
        variables = variable_shapes()
    assert variables == GENERATOR_VARIABLES
    assert {name: tensor.shape.as_list() for name, tensor in end_points.items()} == {
        'encoder0': [2, 8, 12, 4], 'encoder1': [2, 4, 6, 8], 'encoder2': [2, 2, 3, 8],
        'decoder0': [2, 4, 6, 8], 'decoder1': [2, 8, 12, 8], 'decoder2': [2, 16, 24, 4],
        'logits': [2, 16, 24, 5], 'predictions': [2, 16, 24, 5]}
    assert logits is end_points['logits'] and logits.op.name == 'output/Reshape'
    assert end_points['predictions'].op.name == 'output/Tanh'
    assert end_points['encoder0'].op.name == 'encoder/Conv/LeakyRelu'
    assert end_points['encoder2'].op.name == 'encoder/Conv_2/BiasAdd'  # Linear.


def test_pix2pix_generator_upsamples_by_transposed_convolutions():
    with tf.Graph().as_default(), slim.arg_scope(pix2pix.pix2pix_arg_scope()):
        logits, _ = pix2pix.pix2pix_generator(tf.zeros([1, 8, 8, 3]), 5, SMALL_BLOCKS,
                                              upsample_method='conv2d_transpose')
        variables = variable_shapes()
    assert logits.shape.as_list() == [1, 8, 8, 5]
    # Transposed kernels are [height, width, out, in].
    assert variables['decoder/Conv2d_transpose_1/weights'] == [4, 4, 8, 16]
    assert not any(name.startswith('decoder/Conv/') for name in variables)


def test_pix2pix_generator_default_blocks_and_dropout_in_evaluation():
    """Without blocks, TF-Slim's 7; the decoder's dropout acts whatever is_training."""
    with tf.Graph().as_default():
        _, end_points = pix2pix.pix2pix_generator(tf.zeros([1, 128, 128, 1]), 2)
        assert end_points['encoder6'].shape.as_list() == [1, 1, 1, 512]
        assert len([name for name in end_points if name.startswith('decoder')]) == 7
    with tf.Graph().as_default():
        images = np.random.RandomState(0).uniform(-1, 1, [1, 8, 8, 3]).astype(np.float32)
        logits, _ = pix2pix.pix2pix_generator(tf.constant(images), 2, SMALL_BLOCKS,
                                              is_training=False)
        first, second = _evaluate(logits, runs=2)
    assert not np.allclose(first, second)


@pytest.mark.parametrize('call, error, message', [
    (lambda: pix2pix.pix2pix_generator(tf.zeros([1, 20, 16, 3]), 3, SMALL_BLOCKS), ValueError,
     r'multiples of 8 \(2 \*\* len\(blocks\)\), got shape \[1, 20, 16, 3\]'),
    (lambda: pix2pix.pix2pix_generator(tf.placeholder(tf.float32, [1, None, 16, 3]), 3),
     ValueError, 'multiples of 128'),
    (lambda: pix2pix.upsample(tf.zeros([1, 4, 4, 3]), 3, [2, 2], method='bicubic'),
     ValueError, r'Unknown method: \[bicubic\]'),
    (lambda: pix2pix.pix2pix_discriminator(tf.zeros([1, 32, 32, 3]), [8]), ValueError,
     'num_filters needs at least 2 entries'),
    (lambda: pix2pix.pix2pix_discriminator(tf.zeros([1, 32, 32, 3]), [8, 8], padding=-1),
     ValueError, ''),
    (lambda: pix2pix.pix2pix_discriminator(tf.zeros([1, 32, 32, 3]), [8, 8], padding=1.5),
     TypeError, ''),
])
def test_pix2pix_rejects_bad_arguments(call, error, message):
    with tf.Graph().as_default(), pytest.raises(error, match=message):
        call()


def _patches(size, padding, strides):
    """The side of the discriminator's output: one 4x4 'VALID' convolution per stride."""
    for stride in strides:
        size = (size + 2 * padding - 4) // stride + 1
    return size


def test_pix2pix_discriminator_classifies_patches():
    with tf.Graph().as_default(), slim.arg_scope(pix2pix.pix2pix_arg_scope()):
        logits, end_points = pix2pix.pix2pix_discriminator(tf.zeros([2, 64, 64, 3]), [4, 8, 16])
        variables = variable_shapes()
        with tf.variable_scope('Unpadded'):
            unpadded, unpadded_points = pix2pix.pix2pix_discriminator(
                tf.zeros([2, 64, 64, 3]), [4, 8, 16], padding=0)
    # Strides 2, 2, then 1 for the last layer and the logits.
    assert _patches(64, 2, [2, 2, 1, 1]) == 19 and _patches(64, 0, [2, 2, 1, 1]) == 8
    assert logits.shape.as_list() == [2, 19, 19, 1]
    assert unpadded.shape.as_list() == [2, 8, 8, 1]
    assert variables == {
        'conv0/weights': [4, 4, 3, 4], **_biases('conv0', 4),  # No normalizer on the input.
        'conv1/weights': [4, 4, 4, 8], **_instance_norm('conv1', 8),
        'conv2/weights': [4, 4, 8, 16], **_instance_norm('conv2', 16),
        'conv3/weights': [4, 4, 16, 1], **_biases('conv3', 1),
    }
    assert list(end_points) == ['conv0', 'conv1', 'conv2', 'logits', 'predictions']
    # Each padding op opens the layer's scope first, so TF-Slim's layer ops are 'conv<i>_1'.
    assert end_points['conv0'].op.name == 'conv0_1/LeakyRelu'
    assert unpadded_points['conv0'].op.name == 'Unpadded/conv0/LeakyRelu'
    assert end_points['predictions'].op.name == 'Sigmoid'


# CycleGAN.
def _cyclegan_variables(upconv='Conv2d_transpose'):
    """The generator's variables with num_filters 4 and one residual block on 3 channels:
    instance norm but on the output; cyclegan_upsample's transposed convolutions are
    outside its arg_scope (biases, [height, width, out, in])."""
    variables = {'input/Conv/weights': [7, 7, 3, 4], **_instance_norm('input/Conv', 4),
                 'encoder/Conv/weights': [3, 3, 4, 8], **_instance_norm('encoder/Conv', 8),
                 'encoder/Conv_1/weights': [3, 3, 8, 16], **_instance_norm('encoder/Conv_1', 16),
                 'output/Conv/weights': [7, 7, 4, 3], **_biases('output/Conv', 3)}
    for layer in ('Conv', 'Conv_1'):
        name = f'residual_blocks/block_0/{layer}'
        variables.update({f'{name}/weights': [3, 3, 16, 16], **_instance_norm(name, 16)})
    for index, (depth_in, depth) in enumerate([(16, 8), (8, 4)], 1):
        name = f'decoder/decoder{index}/upconv/{upconv}'
        if upconv == 'Conv2d_transpose':
            variables.update({f'{name}/weights': [3, 3, depth, depth_in], **_biases(name, depth)})
        else:
            variables.update({f'{name}/weights': [3, 3, depth_in, depth],
                              **_instance_norm(name, depth)})
    return variables


def test_cyclegan_generator_keeps_the_image_shape():
    with tf.Graph().as_default():
        predictions, end_points = cyclegan.cyclegan_generator_resnet(
            tf.zeros([2, 16, 24, 3]), num_resnet_blocks=1, num_filters=4)
        variables = variable_shapes()
    assert variables == _cyclegan_variables()
    assert {name: tensor.shape.as_list() for name, tensor in end_points.items()} == {
        'encoder_0': [2, 16, 24, 4], 'encoder_1': [2, 8, 12, 8], 'encoder_2': [2, 4, 6, 16],
        'resnet_block_0': [2, 4, 6, 16], 'decoder1': [2, 8, 12, 8], 'decoder2': [2, 16, 24, 4],
        'logits': [2, 16, 24, 3], 'predictions': [2, 16, 24, 3]}
    assert predictions is end_points['predictions'] and predictions.op.name == 'output/add'
    assert end_points['resnet_block_0'].op.name == 'residual_blocks/block_0/add'


@pytest.mark.parametrize('method', ['nn_upsample_conv', 'bilinear_upsample_conv'])
def test_cyclegan_upsampling_by_resizing(method):
    def upsample_fn(net, num_outputs, stride):
        return cyclegan.cyclegan_upsample(net, num_outputs, stride, method=method,
                                          align_corners=True)
    with tf.Graph().as_default():
        predictions, _ = cyclegan.cyclegan_generator_resnet(
            tf.zeros([1, 8, 8, 3]), num_resnet_blocks=1, num_filters=4, upsample_fn=upsample_fn)
        variables = variable_shapes()
    assert predictions.shape.as_list() == [1, 8, 8, 3]
    assert variables == _cyclegan_variables(upconv='Conv')


@pytest.mark.parametrize('kernel_size', [3, 4, [5, 6]])
def test_cyclegan_generator_shapes_for_any_kernel_and_unknown_sizes(kernel_size):
    with tf.Graph().as_default():
        images = tf.placeholder(tf.float32, [None, 12, None, 3])
        predictions, end_points = cyclegan.cyclegan_generator_resnet(
            images, num_resnet_blocks=2, num_filters=2, kernel_size=kernel_size)
        assert predictions.shape.as_list() == [None, 12, None, 3]
        assert len([name for name in end_points if name.startswith('resnet_block_')]) == 2
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            output = sess.run(predictions, {images: np.zeros([2, 12, 20, 3])})
    assert output.shape == (2, 12, 20, 3)


def test_cyclegan_arg_scope_parameters_and_tanh_linear_slope():
    images = np.random.RandomState(0).uniform(-1, 1, [1, 8, 8, 3]).astype(np.float32)

    def arg_scope():
        return cyclegan.cyclegan_arg_scope(instance_norm_center=False, weight_decay=1e-3)
    with tf.Graph().as_default():
        predictions, end_points = cyclegan.cyclegan_generator_resnet(
            tf.constant(images), arg_scope_fn=arg_scope, num_resnet_blocks=1, num_filters=2,
            tanh_linear_slope=0.5)
        variables = variable_shapes()
        penalties = tf.losses.get_regularization_losses()
        [(output, logits)] = _evaluate([predictions, end_points['logits']])
    assert not any(name.endswith('/beta') for name in variables)
    assert 'input/Conv/InstanceNorm/gamma' in variables
    # Every slim.conv2d: input, 2 encoder, 2 residual, output (not the transposed ones).
    assert len(penalties) == 6
    np.testing.assert_allclose(output, np.tanh(logits) + 0.5 * logits, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize('shape, message', [
    ([1, 30, 32, 3], 'The input height must be a multiple of 4, got 30'),
    ([1, 32, 31, 3], 'The input width must be a multiple of 4, got 31'),
])
def test_cyclegan_rejects_sizes_not_multiples_of_4(shape, message):
    with tf.Graph().as_default(), pytest.raises(ValueError, match=message):
        cyclegan.cyclegan_generator_resnet(tf.placeholder(tf.float32, shape))


def test_cyclegan_upsample_rejects_unknown_methods():
    with tf.Graph().as_default(), pytest.raises(ValueError, match=r'Unknown method: \[cubic\]'):
        cyclegan.cyclegan_upsample(tf.zeros([1, 4, 4, 2]), 2, [2, 2], method='cubic')


# DCGAN.
def _batch_norm(layer, depth, zero_debias=False):
    variables = {f'{layer}/BatchNorm/{name}': [depth]
                 for name in ('beta', 'moving_mean', 'moving_variance')}
    if zero_debias:  # The moving mean's debiasing state, under TF's doubled scope.
        prefix = f'{layer}/BatchNorm/{layer}/BatchNorm/moving_mean'
        variables.update({f'{prefix}/biased': [depth], f'{prefix}/local_step': []})
    return variables


@pytest.mark.parametrize('final_size', [8, 16, 64])
def test_dcgan_generator_doubles_up_to_the_final_size(final_size):
    layers = int(np.log2(final_size)) - 1
    with tf.Graph().as_default():
        logits, end_points = dcgan.generator(tf.zeros([3, 10]), depth=2, final_size=final_size,
                                             is_training=False)
    assert list(end_points) == [f'deconv{i}' for i in range(1, layers + 1)] + ['logits']
    assert logits is end_points['logits'] and logits.shape.as_list() == [3, final_size,
                                                                         final_size, 3]
    for i in range(1, layers + 1):
        side = 4 * 2 ** (i - 1)
        depth = 2 * 2 ** (layers - i) if i < layers else 2
        assert end_points[f'deconv{i}'].shape.as_list() == [3, side, side, depth]
    assert logits.op.name == 'Generator/logits/BiasAdd'


def test_dcgan_generator_variables_and_batch_norm_in_training():
    with tf.Graph().as_default():
        dcgan.generator(tf.zeros([2, 10]), depth=4, final_size=16, num_outputs=1)
        variables = variable_shapes()
        update_ops = tf.get_collection(tf.GraphKeys.UPDATE_OPS)
        with tf.variable_scope('Reused'):
            dcgan.generator(tf.zeros([2, 10]), depth=4, final_size=16, num_outputs=1,
                            is_training=False)
        count = len(tf.global_variables())
        dcgan.generator(tf.zeros([2, 10]), depth=4, final_size=16, num_outputs=1, reuse=True,
                        scope='Reused/Generator', is_training=False)
        assert len(tf.global_variables()) == count
    assert variables == {
        'Generator/deconv1/weights': [4, 4, 16, 10],
        **_batch_norm('Generator/deconv1', 16, zero_debias=True),
        'Generator/deconv2/weights': [4, 4, 8, 16],
        **_batch_norm('Generator/deconv2', 8, zero_debias=True),
        'Generator/deconv3/weights': [4, 4, 4, 8], **_biases('Generator/deconv3', 4),
        'Generator/logits/weights': [1, 1, 4, 1], **_biases('Generator/logits', 1),
    }
    assert len(update_ops) == 4  # Moving mean and variance of 2 batch norms.


@pytest.mark.parametrize('side', [1, 2, 8, 32])
def test_dcgan_discriminator_halves_down_to_one_logit(side):
    layers = int(np.log2(side))
    with tf.Graph().as_default():
        logits, end_points = dcgan.discriminator(tf.zeros([3, side, side, 2]), depth=2,
                                                 is_training=False)
        variables = variable_shapes()
    assert list(end_points) == [f'conv{i}' for i in range(1, layers + 1)] + ['logits']
    assert logits is end_points['logits'] and logits.shape.as_list() == [3, 1]
    assert logits.op.name == 'Discriminator/Reshape'
    expected = {'Discriminator/Conv/weights': [1, 1, 2 ** layers if layers else 2, 1],
                **_biases('Discriminator/Conv', 1)}
    for i in range(1, layers + 1):
        layer, depth = f'Discriminator/conv{i}', 2 * 2 ** (i - 1)
        assert end_points[f'conv{i}'].shape.as_list() == [3, side >> i, side >> i, depth]
        expected[f'{layer}/weights'] = [4, 4, depth // 2 if i > 1 else 2, depth]
        expected.update(_batch_norm(layer, depth) if i > 1 else _biases(layer, depth))
    assert variables == expected


def test_dcgan_discriminator_fused_batch_norm():
    with tf.Graph().as_default() as graph:
        dcgan.discriminator(tf.zeros([2, 4, 4, 3]), depth=2, fused_batch_norm=True)
        types = {op.type for op in graph.get_operations()}
    assert 'FusedBatchNormV3' in types


@pytest.mark.parametrize('call, message', [
    (lambda: dcgan.generator(tf.zeros([5, 32, 32])), 'must have rank 2'),
    (lambda: dcgan.generator(tf.zeros([3, 2]), final_size=30),
     r'`final_size` \(30\) must be a power of 2'),
    (lambda: dcgan.generator(tf.zeros([3, 2]), final_size=4),
     r'`final_size` \(4\) must be greater than 8'),
    (lambda: dcgan.discriminator(tf.zeros([5, 32, 32])), 'must have rank 4'),
    (lambda: dcgan.discriminator(tf.placeholder(tf.float32, [5, 32, None, 3])),
     'needs a known height and width'),
    (lambda: dcgan.discriminator(tf.zeros([5, 32, 16, 3])),
     'does not have equal width and height: 32x16'),
    (lambda: dcgan.discriminator(tf.zeros([5, 30, 30, 3])),
     'Input tensor `width` is not a power of 2: 30'),
])
def test_dcgan_rejects_bad_inputs(call, message):
    with tf.Graph().as_default(), pytest.raises(ValueError, match=message):
        call()
