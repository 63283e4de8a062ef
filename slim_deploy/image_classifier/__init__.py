"""The library core under the entry scripts: training, evaluation and export of image
classifiers as functions of typed run configs.

    config      TrainConfig, EvalConfig, ExportConfig and their groups of settings
    roles       run(TrainConfig): what a cluster task does (ps serves, the evaluator
                evaluates, chief and workers train)
    train       train(TrainConfig) -> final global step
    evaluate    evaluate(EvalConfig) -> metrics
    export      export(ExportConfig) -> paths written
    runs        a run's record (run_config.json) and the configs that default to it
    parts       the split, network, preprocessing and devices a config names
    slim_flags  slim's flags, defined from the configs, and the configs built from them
    flag_reference  the manual's flag reference (docs/flags.md), printed from the configs
    cli, quiet  entry-point plumbing: one-line user errors, quiet start-up

This package sits above slim_deploy/nets/, slim_deploy/datasets/ and slim_deploy/preprocessing/,
which it brings together; slim_deploy/deployment/ below imports none of them. The package itself
imports nothing, so that an entry script can run quiet.start() before TensorFlow is imported.
"""
