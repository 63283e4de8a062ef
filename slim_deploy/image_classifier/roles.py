"""run(config): the one place that turns this process's role in a training cluster into what
it does. A ps task serves the variables, the evaluator evaluates the chief's checkpoints as
they appear, and the chief and workers, or a process outside any cluster, train."""
from slim_deploy.cluster import tasks
from slim_deploy.image_classifier import evaluate, train


def run(config):
    """Does what `config` (a TrainConfig) makes this process; returns train.train's final
    global step for a trainer (None when no step ran) and None for the evaluator.

    A ps task serves until SIGTERM or SIGINT, then until the chief has written its last
    checkpoint (within the grace period), and raises errors.Interrupted (tasks.serve). The
    evaluator evaluates each new checkpoint in train_dir until the one of
    max_number_of_steps (0: until stopped), as
    evaluate.evaluate_continuously(evaluate.evaluator_config(config)) does. Raises what the
    function doing the work raises.
    """
    cluster = config.cluster
    if cluster.is_ps:
        tasks.serve(cluster.cluster_task, config.schedule.grace_period_secs)
    elif cluster.is_evaluator:
        evaluate.evaluate_continuously(evaluate.evaluator_config(config),
                                       last_step=config.schedule.max_number_of_steps or None)
    else:
        return train.train(config)
    return None
