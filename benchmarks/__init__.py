"""The project's benchmarks, each run from the repository root as `python -m benchmarks.NAME`
(`--help` for its options):

  throughput        training throughput: deploy() against tf.distribute, per precision
  input_pipeline    what the tf.data input pipeline costs training
  network           training over bandwidth-limited links on emulated hosts (needs root)
  fault_injection   kills tasks of a training cluster and checks that the job survives
  quantization      float, post-training quantized and quantization-aware TensorFlow Lite
                    models against their float checkpoint

harness, trainers and faults are what they share. From another directory, put the
repository root on PYTHONPATH.
"""
