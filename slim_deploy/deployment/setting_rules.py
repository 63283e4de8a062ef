"""The rules on which of DeploymentConfig's and deploy()'s settings go together: each
*_problem function returns what is wrong with a combination as one line, None if nothing,
naming each setting through show(name, value), as its caller names it (DeploymentConfig's
parameters, 'num_ps_tasks=0'; train_image_classifier's flags, '--num_ps_tasks=0'), so that
the same rule speaks to Python callers and to command lines alike.
"""
from slim_deploy.deployment import precision as precision_lib


def variable_update_problem(variable_update, num_replicas, num_ps_tasks, show):
    """What is wrong with `variable_update` for `num_replicas` workers and `num_ps_tasks` ps
    tasks, as a message; None if nothing. show(name, value): a setting as the caller names
    it, for name in 'variable_update', 'num_replicas' and 'num_ps_tasks'."""
    mode = show('variable_update', variable_update)
    if variable_update == 'parameter_server' and num_replicas > 1 and not num_ps_tasks:
        return (f'{show("num_replicas", num_replicas)} needs ps tasks to hold the shared '
                f'variables ({show("num_ps_tasks", num_ps_tasks)}), or '
                f'{show("variable_update", "collective")}')
    if variable_update != 'parameter_server' and num_ps_tasks:
        return (f'{mode} keeps the variables on the clones: it takes no ps tasks, got '
                f'{show("num_ps_tasks", num_ps_tasks)}')
    if variable_update == 'replicated' and num_replicas > 1:
        return (f'{mode} runs on one worker, got {show("num_replicas", num_replicas)}: use '
                f'{show("variable_update", "collective")} for several')
    if variable_update == 'collective' and num_replicas == 1:
        return (f'{mode} needs several workers, got {show("num_replicas", num_replicas)}: '
                f'use {show("variable_update", "replicated")} for one')
    return None


def gradient_compression_problem(gradient_compression, variable_update, num_ps_tasks, show,
                                 ps_tasks_possible=True):
    """What is wrong with compressing gradients (a name in compression.COMPRESSIONS) under
    `variable_update` with `num_ps_tasks` ps tasks, as a message; None if nothing. show: as
    variable_update_problem's, also for 'gradient_compression'. ps_tasks_possible: whether
    the message may advise ps tasks."""
    if gradient_compression == 'none' or variable_update == 'collective' or num_ps_tasks:
        return None
    where = (show('variable_update', variable_update) if variable_update == 'replicated' else
             f'{show("variable_update", variable_update)} without ps tasks')
    return (f'{show("gradient_compression", gradient_compression)} compresses the gradients '
            f'sent between tasks, and {where} sends none: use it with '
            f'{"ps tasks or " if ps_tasks_possible else ""}'
            f'{show("variable_update", "collective")}')


def prefetch_reads_problem(prefetch_reads, variable_update, num_ps_tasks, show):
    """What is wrong with prefetching the reads of ps tasks' variables under
    `variable_update` with `num_ps_tasks` ps tasks, as a message; None if nothing. show: as
    variable_update_problem's, also for 'prefetch_reads'."""
    if not prefetch_reads or (variable_update == 'parameter_server' and num_ps_tasks):
        return None
    return (f'{show("prefetch_reads", True)} prefetches the reads from ps tasks, and '
            f'{show("variable_update", variable_update)} with '
            f'{show("num_ps_tasks", num_ps_tasks)} reads none: use it with '
            f'{show("variable_update", "parameter_server")} and ps tasks')


def variable_partitioner_problem(variable_partitioner, variable_update, num_ps_tasks, show):
    """What is wrong with partitioning the variables (variable_partitioner: None for none)
    under `variable_update` with `num_ps_tasks` ps tasks, as a message; None if nothing.
    show: as variable_update_problem's, also for 'variable_partitioner'."""
    if variable_partitioner is None or num_ps_tasks:
        return None
    where = ('' if variable_update == 'parameter_server' else
             f' ({show("variable_update", variable_update)} keeps them on the clones)')
    return (f'{show("variable_partitioner", variable_partitioner)} splits the variables over '
            f'the ps tasks, and {show("num_ps_tasks", num_ps_tasks)} has none{where}: use it '
            'with ps tasks')


def distinct_devices_problem(variable_update, sync_batch_norm, num_clones, clone_on_cpu,
                             clone_devices, show):
    """What is wrong with the clones' devices, as a message, when the clones all-reduce
    between them (variable_update not parameter_server, or sync_batch_norm) and so must sit on
    distinct devices; None if nothing. clone_devices: one device per clone, or None for the
    defaults (CPU:0 for all with clone_on_cpu). show: as variable_update_problem's, also for
    'sync_batch_norm' and 'clone_on_cpu'."""
    if variable_update != 'parameter_server':
        setting = show('variable_update', variable_update)
    elif sync_batch_norm:
        setting = show('sync_batch_norm', True)
    else:
        return None
    if clone_devices is None and clone_on_cpu and num_clones > 1:
        return (f'{setting} all-reduces between the clones, which must sit on distinct '
                f'devices, but {show("clone_on_cpu", True)} puts all {num_clones} on CPU:0')
    if clone_devices is not None and len(set(clone_devices)) < len(clone_devices):
        return (f'{setting} all-reduces between the clones, which must sit on distinct '
                f'devices; got {list(clone_devices)}')
    return None


def quantize_delay_problem(quantize_delay, sync_batch_norm, show):
    """What is wrong with quantization-aware training from global step `quantize_delay`
    (None: none) with `sync_batch_norm`, as a message; None if nothing. show: as
    variable_update_problem's, for 'quantize_delay' and 'sync_batch_norm'."""
    if quantize_delay is None or quantize_delay < 0 or not sync_batch_norm:
        return None
    return (f'{show("quantize_delay", quantize_delay)} cannot go with '
            f'{show("sync_batch_norm", True)}: the quantization rewrite folds each clone\'s '
            'batch norm into its weights with the statistics of its own batch')


def sync_replicas_problem(precision, prefetch_reads, show):
    """What keeps synchronous replicas (a SyncReplicasOptimizer, --sync_replicas) from
    running with `precision` (a name in PRECISIONS) and `prefetch_reads`, as a message; None
    if nothing. show: as variable_update_problem's, also for 'sync_replicas', 'precision' and
    'prefetch_reads'."""
    sync = show('sync_replicas', True)
    if prefetch_reads:
        return (f'{show("prefetch_reads", True)} cannot go with {sync}: synchronous workers '
                'read the variables after each update, and a gradient of values read before '
                'it is dropped as stale; prefetch with asynchronous workers')
    if precision_lib.PRECISIONS[precision].loss_scaling:
        return (f'{show("precision", precision)} cannot go with {sync}: the chief applies the '
                'aggregated gradients, which dynamic loss scaling cannot skip; use bfloat16 '
                'or asynchronous workers')
    return None
