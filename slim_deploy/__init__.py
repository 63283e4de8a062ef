"""slim-deploy: TF-Slim's model_deploy, nets and training scripts on current TensorFlow, in
one package, so that installing it writes into no folder another project owns.

    deployment         model_deploy and the machinery of data-parallel training
    nets               the TF-Slim network zoo behind one factory
    datasets           dataset descriptions, converters and the tf.data input pipeline
    preprocessing      image preprocessing, one function per network family
    image_classifier   training, evaluation and export as functions of typed run configs
    train_image_classifier, eval_image_classifier, export_inference_graph,
    download_and_convert_data, check_equivalence
                       the entry scripts, installed as console commands of those names

TF-Slim's import paths (`from nets import nets_factory`) reach the same modules through
`aliases`, which importing this package installs. The package imports nothing else, so
that an entry script can quiet TensorFlow before TensorFlow is imported.
"""
from slim_deploy import aliases

aliases.install()
