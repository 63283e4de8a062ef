"""The library core under the entry scripts: training, evaluation and export of image
classifiers as functions of typed run configs.

    config      TrainConfig, EvalConfig, ExportConfig and their groups of settings
    roles       run(TrainConfig): what a cluster task does (ps serves, the evaluator
                evaluates, chief and workers train)
    train       train(TrainConfig) -> final global step
    evaluate    evaluate(EvalConfig) -> metrics
    export      export(ExportConfig) -> paths written
    run_record  a run's record (run_config.json) and the configs that default to it
    flag_reference  the manual's flag reference (docs/flags.md), printed from the configs
Internal:
    builders    the split, network, preprocessing, devices and model_fn a config names
    slim_flags  slim's flags, defined from the configs, and the configs built from them
    cli, verbosity  entry-point plumbing: one-line user errors, quiet start-up

This package sits above slim_deploy/nets/, slim_deploy/datasets/, slim_deploy/preprocessing/,
slim_deploy/deployment/, slim_deploy/training/ and slim_deploy/cluster/, which it brings
together. The package itself imports nothing, so that an entry script can run
verbosity.start() before TensorFlow is imported.
"""
__all__ = ['config', 'evaluate', 'export', 'flag_reference', 'roles', 'run_record', 'train']
