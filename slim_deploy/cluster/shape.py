"""What every launch path agrees on about a cluster's shape, without TensorFlow: the port its
tasks serve on and the rule its worker flags keep (the launcher checks it before starting
any task, and each task's flags again)."""

PORT = 2222  # Every task's port on its own host (TensorFlow's conventional one).


def workers_problem(worker_replicas, sync_replicas, replicas_to_aggregate=None):
    """What is wrong with --worker_replicas for --sync_replicas and --replicas_to_aggregate
    (None: not given), as a one-line message; None if nothing."""
    if not sync_replicas:
        return None
    if worker_replicas < 2:
        return f'--sync_replicas needs --worker_replicas > 1, got {worker_replicas}'
    if replicas_to_aggregate is not None and replicas_to_aggregate > worker_replicas:
        return (f'--replicas_to_aggregate={replicas_to_aggregate} exceeds '
                f'--worker_replicas={worker_replicas}')
    return None
