"""Video preprocessing for I3D and S3D-G, as in their Kinetics training: scale the frames'
smaller side to 256, crop (random for training, central for evaluation), flip at random
when training and scale pixels to [-1, 1]. Every frame gets the same crop and flip.

TF-Slim ships no preprocessing for these nets; this follows their papers' recipe.
"""
import tensorflow as tf

RESIZE_SIDE = 256


def _resize_smaller_side(video, side):
    """Resizes every frame of `video` [T, H, W, C] bilinearly, keeping the aspect ratio,
    so that the smaller side is `side` pixels."""
    height_width = tf.cast(tf.shape(video)[1:3], tf.float32)
    scale = side / tf.reduce_min(height_width)
    return tf.image.resize(video, tf.cast(tf.round(height_width * scale), tf.int32))


def _random_crop(video, height, width):
    """One random height x width window of `video` [T, H, W, C], the same in every
    frame."""
    shape = tf.shape(video)
    top = tf.random.uniform([], 0, shape[1] - height + 1, tf.int32)
    left = tf.random.uniform([], 0, shape[2] - width + 1, tf.int32)
    return tf.image.crop_to_bounding_box(video, top, left, height, width)


def preprocess_image(video, output_height, output_width, is_training=False,
                     use_grayscale=False, resize_side=RESIZE_SIDE):
    """Returns float32 [T, output_height, output_width, C'] with values in [-1, 1].

    video: [T, H, W, C] frames, uint8 in [0, 255] or float in [0, 1], with C known.
    resize_side: the frames' smaller side after resizing, in pixels, but never below the
      larger output side, so the crop always fits.
    Training: a random crop, the same for all frames, then a left-right flip of the whole
    clip with probability 1/2. Evaluation: the central crop.
    use_grayscale: turn the (RGB) frames into one channel of luma, so C' is 1 (else C).
    """
    video = tf.image.convert_image_dtype(video, tf.float32)
    if use_grayscale:
        video = tf.image.rgb_to_grayscale(video)
    video = _resize_smaller_side(video, max(resize_side, output_height, output_width))
    if is_training:
        video = _random_crop(video, output_height, output_width)
        video = tf.cond(tf.random.uniform([]) < 0.5,
                        lambda: tf.image.flip_left_right(video), lambda: video)
    else:
        video = tf.image.resize_with_crop_or_pad(video, output_height, output_width)
    return (video - 0.5) * 2.0
