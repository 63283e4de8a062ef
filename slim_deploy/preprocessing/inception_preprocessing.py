"""Inception preprocessing, as TF-Slim's: outputs are float32 in [-1, 1].

Training takes a random crop that covers part of the object's bounding box, resizes it,
flips it and jitters its colors; evaluation keeps the central 87.5% of each side and
resizes it. Resizing is tf.image's v1 (no half-pixel centers), as slim's checkpoints saw.

Images may have one channel as well as three: the color-only distortions (saturation and
hue) then leave them as they are.
"""
import functools

import tensorflow.compat.v1 as tf

# The random color distortions, each [H, W, C] float in [0, 1] -> the same, unclamped.
_DISTORTIONS = {
    'brightness': lambda image: tf.image.random_brightness(image, max_delta=32 / 255),
    'saturation': lambda image: tf.image.random_saturation(image, lower=0.5, upper=1.5),
    'hue': lambda image: tf.image.random_hue(image, max_delta=0.2),
    'contrast': lambda image: tf.image.random_contrast(image, lower=0.5, upper=1.5),
}
_COLOR_ONLY = ('saturation', 'hue')
# distort_color's orders by color_ordering: in fast mode 0 or any other value; else 0 to 3.
_FAST_ORDERINGS = (('brightness', 'saturation'), ('saturation', 'brightness'))
_ORDERINGS = (('brightness', 'saturation', 'hue', 'contrast'),
              ('saturation', 'brightness', 'contrast', 'hue'),
              ('contrast', 'hue', 'brightness', 'saturation'),
              ('hue', 'saturation', 'contrast', 'brightness'))
# tf.image's v1 resize methods are 0 to 3: bilinear, nearest neighbor, bicubic, area.
_NUM_RESIZE_METHODS = 4


def apply_with_random_selector(x, func, num_cases):
    """Returns func(x, case) for one case in 0 .. num_cases - 1, drawn uniformly at each
    run. func is called once per case, with the case as a Python int; only the drawn
    case's ops run."""
    case = tf.random.uniform([], maxval=num_cases, dtype=tf.int32)
    return tf.switch_case(case, [functools.partial(func, x, i) for i in range(num_cases)])


def distort_color(image, color_ordering=0, fast_mode=True, scope=None):
    """Returns `image` [H, W, C] (float in [0, 1]) with random brightness and saturation
    changes (plus hue and contrast without fast_mode), clipped to [0, 1]. A one-channel
    image gets the brightness and contrast changes only.

    color_ordering: the order of the changes, each order giving different results. In fast
      mode 0 is brightness first and any other value saturation first; otherwise it must be
      0 to 3 (ValueError).
    """
    if fast_mode:
        ordering = _FAST_ORDERINGS[0 if color_ordering == 0 else 1]
    elif color_ordering in range(len(_ORDERINGS)):
        ordering = _ORDERINGS[color_ordering]
    else:
        raise ValueError('color_ordering must be in [0, 3]')
    with tf.name_scope(scope, 'distort_color', [image]):
        for distortion in ordering:
            if image.shape[-1] != 1 or distortion not in _COLOR_ONLY:
                image = _DISTORTIONS[distortion](image)
        return tf.clip_by_value(image, 0.0, 1.0)


def distorted_bounding_box_crop(image, bbox, min_object_covered=0.1,
                                aspect_ratio_range=(0.75, 1.33), area_range=(0.05, 1.0),
                                max_attempts=100, scope=None):
    """Returns (crop, crop_box): a random crop of `image` [H, W, C] (shape [?, ?, ?]) and
    its box, float [1, 1, 4] (ymin, xmin, ymax, xmax) in [0, 1].

    bbox: float [1, num_boxes, 4] boxes (ymin, xmin, ymax, xmax) in [0, 1]; with no boxes
      the whole image is the box. The crop holds at least min_object_covered of one box, has
      an aspect ratio (width / height) in aspect_ratio_range and a fraction of the image's
      area in area_range; after max_attempts failed draws it is the whole image.
    """
    with tf.name_scope(scope, 'distorted_bounding_box_crop', [image, bbox]):
        # Seeded from the graph's seed, as other random ops are (TensorFlow's own op takes
        # an explicit seed alone).
        seed, seed2 = tf.get_seed(None)
        begin, size, crop_box = tf.image.sample_distorted_bounding_box(
            tf.shape(image), bounding_boxes=bbox, seed=seed, seed2=seed2,
            min_object_covered=min_object_covered, aspect_ratio_range=aspect_ratio_range,
            area_range=area_range, max_attempts=max_attempts,
            use_image_if_no_bounding_boxes=True)
        return tf.slice(image, begin, size), crop_box


def _to_minus_one_to_one(image):
    """[0, 1] -> [-1, 1]."""
    return tf.multiply(tf.subtract(image, 0.5), 2.0)


def _summarize_boxes(name, image, boxes):
    """An image summary of `image` [H, W, C] with `boxes` [1, num_boxes, 4] drawn on it."""
    tf.summary.image(name, tf.image.draw_bounding_boxes(tf.expand_dims(image, 0), boxes))


def preprocess_for_train(image, height, width, bbox, fast_mode=True, scope=None,
                         add_image_summaries=True, random_crop=True, use_grayscale=False):
    """Returns a randomly distorted float32 [height, width, C'] in [-1, 1] for training.

    image: [H, W, C], C 1 or 3 known statically, float32 in [0, 1] or an integer type in
      [0, its maximum] (converted by tf.image.convert_image_dtype).
    bbox: float [1, num_boxes, 4] object boxes (ymin, xmin, ymax, xmax) in [0, 1] the crop
      must overlap (distorted_bounding_box_crop); None is the whole image.
    fast_mode: bilinear resizing and brightness and saturation changes only; otherwise the
      resize method is one of four and the color changes add hue and contrast, each drawn
      at random.
    random_crop: False resizes the whole image.
    use_grayscale: turn the (RGB) result into one channel of luma, so C' is 1 (else C).
    add_image_summaries: image summaries of the boxes, the resized crop and the result.
    """
    with tf.name_scope(scope, 'distort_image', [image, height, width, bbox]):
        if bbox is None:
            bbox = tf.constant([0.0, 0.0, 1.0, 1.0], tf.float32, shape=[1, 1, 4])
        image = tf.image.convert_image_dtype(image, tf.float32)
        if add_image_summaries:
            _summarize_boxes('image_with_bounding_boxes', image, bbox)
        distorted = image
        if random_crop:
            distorted, crop_box = distorted_bounding_box_crop(image, bbox)
            distorted.set_shape([None, None, image.shape[-1]])
            if add_image_summaries:
                _summarize_boxes('images_with_distorted_bounding_box', image, crop_box)
        num_cases = 1 if fast_mode else _NUM_RESIZE_METHODS
        distorted = apply_with_random_selector(
            distorted, lambda x, method: tf.image.resize_images(x, [height, width], method),
            num_cases)
        if add_image_summaries:
            tf.summary.image(('cropped_' if random_crop else '') + 'resized_image',
                             tf.expand_dims(distorted, 0))
        distorted = tf.image.random_flip_left_right(distorted)
        distorted = apply_with_random_selector(
            distorted, lambda x, ordering: distort_color(x, ordering, fast_mode),
            1 if fast_mode else len(_ORDERINGS))
        if use_grayscale:
            distorted = tf.image.rgb_to_grayscale(distorted)
        if add_image_summaries:
            tf.summary.image('final_distorted_image', tf.expand_dims(distorted, 0))
        return _to_minus_one_to_one(distorted)


def preprocess_for_eval(image, height, width, central_fraction=0.875, scope=None,
                        central_crop=True, use_grayscale=False):
    """Returns float32 [height, width, C'] in [-1, 1]: the central crop, resized bilinearly.

    image: [H, W, C], float32 in [0, 1] or an integer type in [0, its maximum].
    central_fraction: the fraction of each side the crop keeps; None or 0 (or central_crop
      False) keeps the whole image. height or width None or 0: no resizing (the output is
      then the crop's size).
    use_grayscale: turn the (RGB) image into one channel of luma first, so C' is 1 (else C).
    """
    with tf.name_scope(scope, 'eval_image', [image, height, width]):
        image = tf.image.convert_image_dtype(image, tf.float32)
        if use_grayscale:
            image = tf.image.rgb_to_grayscale(image)
        if central_crop and central_fraction:
            image = tf.image.central_crop(image, central_fraction=central_fraction)
        if height and width:
            image = tf.image.resize_images(image, [height, width])
        return _to_minus_one_to_one(image)


def preprocess_image(image, height, width, is_training=False, bbox=None, fast_mode=True,
                     add_image_summaries=True, crop_image=True, use_grayscale=False,
                     central_fraction=0.875):
    """Returns float32 [height, width, C'] in [-1, 1]: preprocess_for_train's result (with
    bbox, fast_mode, add_image_summaries) when is_training, else preprocess_for_eval's (with
    central_fraction). crop_image False skips the random or central crop.

    image: [H, W, C], float32 in [0, 1] or an integer type in [0, its maximum].
    use_grayscale: turn the (RGB) image into one channel of luma, so C' is 1 (else C).
    """
    if is_training:
        return preprocess_for_train(image, height, width, bbox, fast_mode,
                                    add_image_summaries=add_image_summaries,
                                    random_crop=crop_image, use_grayscale=use_grayscale)
    return preprocess_for_eval(image, height, width, central_fraction,
                               central_crop=crop_image, use_grayscale=use_grayscale)
