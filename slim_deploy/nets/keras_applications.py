"""tf-keras applications in the zoo, built from scratch (weights=None: nothing is downloaded)
behind the zoo's calling convention: builder(images, num_classes, is_training=...) ->
(logits [batch, num_classes], end_points: 'Logits' and their softmax 'Predictions', as
slim's nets name them), or (pooled features [batch, depth], {}) when num_classes is None;
`weight_decay` comes through the Network's arg_scope, as for slim's nets.

Each call builds a new tf-keras model on `images` (3 channels), in training mode (batch
norm on batch statistics, its moving averages updated; dropout on) or inference mode as
`is_training` says. Under deploy() every clone shares clone 0's variables (see
slim_deploy.deployment.variable_sharing). As with slim's nets, the variables join
tf.GraphKeys.MODEL_VARIABLES (for fine-tuning, moving averages and evaluation), the batch norms'
updates of their moving statistics join UPDATE_OPS, and weight decay is an L2 loss on every kernel
(not on biases or normalization parameters) in REGULARIZATION_LOSSES, as slim's
l2_regularizer computes it.
"""
import contextlib
import dataclasses
from typing import Callable

import tensorflow.compat.v1 as tf
import tf_keras
from tf_keras.src.engine import base_layer_utils
import tf_slim as slim


@dataclasses.dataclass(frozen=True)
class Application:
    """A tf-keras application as a zoo net: builder, arg_scope and min_image_size as
    nets_factory.Network's; preprocessing: its family in preprocessing_factory.PREPROCESSING."""
    builder: Callable
    arg_scope: Callable
    preprocessing: str
    min_image_size: int


@contextlib.contextmanager
def _graph_op_layers_unevaluated():
    """In a TF1 graph, tf-keras evaluates each constant that a raw TensorFlow op applies to a
    Keras tensor (MobileNetV3's `x + 3.0`) in a session of its own, which first initializes
    every variable of the graph there (and fails for variables on ps tasks). Meanwhile this
    makes it keep them as tensors, as it does under tf.distribute."""
    saved = base_layer_utils._UNSAFE_GRAPH_OP_LAYER_CREATION
    base_layer_utils._UNSAFE_GRAPH_OP_LAYER_CREATION = True
    try:
        yield
    finally:
        base_layer_utils._UNSAFE_GRAPH_OP_LAYER_CREATION = saved


def _application(constructor, preprocessing, min_image_size=1):
    """The Application of tf_keras.applications' `constructor` (e.g. ResNet50), which takes
    images of at least min_image_size pixels a side."""
    @slim.add_arg_scope
    def builder(images, num_classes, is_training=False, weight_decay=0.0):
        with _graph_op_layers_unevaluated(), \
                tf_keras.backend.learning_phase_scope(1 if is_training else 0):
            model = constructor(weights=None, input_tensor=tf_keras.Input(tensor=images),
                                include_top=bool(num_classes), classes=num_classes or 1000,
                                pooling=None if num_classes else 'avg',
                                classifier_activation=None)
        known = set(tf.get_collection(tf.GraphKeys.MODEL_VARIABLES))
        for weight in model.weights:
            if weight not in known:
                tf.add_to_collection(tf.GraphKeys.MODEL_VARIABLES, weight)
        for update in model.updates:  # Batch norm's moving statistics, as slim's.
            tf.add_to_collection(tf.GraphKeys.UPDATE_OPS, update)
        if weight_decay:
            for weight in model.trainable_weights:
                if weight.shape.rank > 1:  # A kernel.
                    tf.losses.add_loss(weight_decay * tf.nn.l2_loss(weight),
                                       tf.GraphKeys.REGULARIZATION_LOSSES)
        if not num_classes:
            return model.output, {}
        return model.output, {'Logits': model.output,
                              'Predictions': tf.nn.softmax(model.output, name='Predictions')}

    builder.default_image_size = 224

    def arg_scope(weight_decay=0.0):
        with slim.arg_scope([builder], weight_decay=weight_decay) as scope:
            return scope

    return Application(builder, arg_scope, preprocessing, min_image_size)


APPLICATIONS = {
    'keras_convnext_tiny': _application(tf_keras.applications.ConvNeXtTiny, 'keras', 32),
    'keras_efficientnet_b0': _application(tf_keras.applications.EfficientNetB0, 'keras'),
    'keras_mobilenet_v3_small': _application(tf_keras.applications.MobileNetV3Small, 'keras',
                                             32),
    'keras_resnet50': _application(tf_keras.applications.ResNet50, 'keras_caffe'),
}
