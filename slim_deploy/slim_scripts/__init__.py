"""slim's scripts that research/slim keeps in nets/ (mobilenet_v1_train, mobilenet_v1_eval,
post_training_quantization): entry scripts that read datasets, so they live above nets/ and
datasets/ here; slim's names (`python -m nets.mobilenet_v1_train`, `from nets import
mobilenet_v1_eval`) import them (slim_deploy.aliases.ELSEWHERE). mobilenet_v1_input is their
shared input."""
