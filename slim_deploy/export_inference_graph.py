r"""Exports a classifier's inference graph (slim's GraphDef), a SavedModel and/or a
TensorFlow Lite model.

    python export_inference_graph.py --output_file=/tmp/lenet_inf_graph.pb
    python export_inference_graph.py --checkpoint_path=/tmp/tfmodel \
        --saved_model_dir=/tmp/lenet_saved_model
    python export_inference_graph.py --checkpoint_path=/tmp/tfmodel \
        --tflite_file=/tmp/lenet_int8.tflite --tflite_quantization=int8

Given a training run's --checkpoint_path, the model, dataset (name, directory, split),
labels offset, preprocessing, grayscale, image size and --quantize default to the run's.
The GraphDef holds the network in eval mode behind a float32 placeholder named 'input' of
shape [batch_size, image_size, image_size, channels], without variable values (slim's
format, for freeze_graph). The SavedModel
holds the checkpoint's values and a 'serving_default' signature: input 'images' (float32
[N, image_size, image_size, channels], already preprocessed as for evaluation) ->
'logits' and 'probabilities' (float32 [N, num_classes]).

--tflite_file writes the same graph as a TensorFlow Lite model (input 'input', outputs
'logits' and 'probabilities'): float, float16, dynamic-range or int8 (--tflite_quantization).
From a run trained with --quantize_delay the graph is quantized (--quantize, as slim's)
and the model int8 with the ranges learned in training; from a float checkpoint, int8 is
post-training quantization calibrated on --representative_steps examples of the run's
training split. --tflite_io_type=int8 or uint8 makes an int8 model take and give integers.
The work is slim_deploy.image_classifier.export.export(ExportConfig).
"""
from slim_deploy.image_classifier import verbosity

verbosity.start()  # Before TensorFlow is imported.

from slim_deploy.image_classifier import cli, config, export, slim_flags  # noqa: E402

slim_flags.define(config.ExportConfig, __name__)


def main(argv):
    del argv
    export.export(slim_flags.export_config())


def run():
    """Console-script entry point."""
    cli.run(main, __name__)


if __name__ == '__main__':
    run()
