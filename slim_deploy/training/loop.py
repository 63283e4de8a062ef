"""The training loop: tf.compat.v1.train.MonitoredTrainingSession with slim's behaviour.

Checkpoints and summaries go to train_dir (chief only); a restarted run resumes from the
newest intact checkpoint there; the loop stops at the last step, on a non-finite loss, or
after the step in flight when SIGTERM or SIGINT arrives (see SignalStop).
"""
import contextlib
import math
import os
import signal
import socket
import sys
import threading
import time

from absl import logging
import tensorflow.compat.v1 as tf

from slim_deploy.common.errors import Interrupted, UsageError
from slim_deploy.deployment import all_reduce, late_workers, ordered_sync
from slim_deploy.deployment import precision as precision_lib
from slim_deploy.training import checkpoints

READY_POLL_SECS = 1.0  # How often a non-chief worker checks whether the chief is ready.
SIT_OUT_POLL_SECS = 0.02  # How often a worker sitting out updates reads the global step.
# Before training alone, the chief waits until the global step has stood still for this many
# of its own step times, and at least QUIET_MIN_SECS.
QUIET_STEP_TIMES = 5
QUIET_MIN_SECS = 3.0
# Seconds after SIGTERM or SIGINT within which training must have stopped: Kubernetes waits
# 30 s before it kills a pod.
GRACE_SECS = 20.0


class NonFiniteLossError(UsageError):
    """The loss became NaN or Inf (training diverged: a setting, usually --learning_rate, is
    too high); training stopped before checkpointing that step."""


def session_config(num_cpu_devices=None, log_device_placement=False, device_filters=None,
                   collective_leader=None, precision='float32', remote=False):
    """A ConfigProto with soft placement (ops without a kernel on the requested device,
    e.g. no GPU kernel, fall back to the CPU), `num_cpu_devices` CPU devices (None:
    TensorFlow's default of one), `device_filters` (None: every device of the cluster),
    the task that leads collective groups across processes (None: none, e.g.
    '/job:worker/replica:0/task:0') and the graph rewrite of `precision` (see
    slim_deploy.deployment.precision); `remote`: for a session through a gRPC server, or the
    server."""
    config = tf.ConfigProto(allow_soft_placement=True,
                            log_device_placement=log_device_placement,
                            device_filters=device_filters)
    if num_cpu_devices:
        config.device_count['CPU'] = num_cpu_devices
    if collective_leader:
        config.experimental.collective_group_leader = collective_leader
    precision_lib.configure(config, precision, remote)
    return config


class MonitorHook(tf.train.SessionRunHook):
    """Checks the loss every step, logs progress every `every_n_steps` local steps and
    stops training at global step `last_step` (None: never).

    train_tensor: the tensor each step runs; it must return the loss (as deploy()'s
    train_op does). Logs global step, loss, learning rate, global examples/sec and
    sec/step; writes the throughput to `summary_dir` (None: no summaries). Raises
    NonFiniteLossError when the loss is NaN or Inf; it must run before the checkpoint hook
    so that step is never saved.

    examples_per_step: examples one global step stands for (batch_size x num_clones x
    micro-batches, x replicas_to_aggregate when sync), so examples/sec counts every
    worker's work. runs_per_step: runs of train_tensor per step here (the micro-batches of
    gradient accumulation): logging and sec/step count steps of that many runs.

    With dynamic loss scaling (precision.LOSS_SCALE in the graph) every skipped update is
    logged, with the lowered loss scale, and counted in `skipped_updates`.

    alone_from: for the chief of asynchronous workers that stop at this global step (None:
    not so). Once it is reached, the chief waits until the other workers' last updates have
    landed (the global step stands still for a while) and runs the remaining steps alone,
    so that together they stop exactly at last_step instead of racing past it.
    """

    def __init__(self, train_tensor, learning_rate, examples_per_step, every_n_steps,
                 summary_dir=None, last_step=None, alone_from=None, runs_per_step=1):
        self._train_tensor = train_tensor
        self._last_step = last_step
        self._alone_from = alone_from
        self._learning_rate = learning_rate
        self._examples_per_step = examples_per_step
        self._every_n_steps = every_n_steps
        self._summary_dir = summary_dir
        self._runs_per_step = runs_per_step

    def begin(self):
        self._global_step = tf.train.get_global_step()
        after_update = {'global_step': self._global_step}
        loss_scale = precision_lib.loss_scale_variables()
        if loss_scale:
            after_update.update(zip(('loss_scale', 'skipped_updates'), loss_scale))
        with tf.control_dependencies([self._train_tensor]):  # Their values after the update.
            self._fetches = {name: tf.identity(value) for name, value in after_update.items()}
        self._fetches.update(loss=self._train_tensor, learning_rate=self._learning_rate)
        self.skipped_updates = 0  # Updates dynamic loss scaling skipped in this process.
        self._skipped_in_session = 0  # The count of the session's (local) variable.
        self.global_step = None  # The last global step seen, None before the first run.
        self._runs = 0  # Runs of train_tensor this process made.
        self._last_time = None
        self._last_global_step = None
        self._started = None  # Time of the first step's end.
        self._alone = False
        self._writer = None  # The FileWriter of summary_dir, once a summary is written.

    @property
    def local_steps(self):
        """Steps this process ran (runs of train_tensor / runs_per_step)."""
        return self._runs // self._runs_per_step

    def after_create_session(self, session, coord):
        self._skipped_in_session = 0  # A new session initializes its local variables.
        step = session.run(self._global_step)
        if self._alone_from is not None and step >= self._alone_from:
            step = self._wait_for_others(session)
        if self._last_step is not None and step >= self._last_step:
            coord.request_stop()  # Restored at the last step already: run none.

    def _wait_for_others(self, session):
        """Waits until the global step has stood still for the quiet time; returns it."""
        step_secs = ((time.time() - self._started) * self._runs_per_step / (self._runs - 1)
                     if self._runs > 1 else 0)
        quiet_secs = max(QUIET_MIN_SECS, QUIET_STEP_TIMES * step_secs)
        step, still_since = session.run(self._global_step), time.monotonic()
        while time.monotonic() - still_since < quiet_secs:
            time.sleep(quiet_secs / 20)
            latest = session.run(self._global_step)
            if latest != step:
                step, still_since = latest, time.monotonic()
        self._alone = True
        logging.info('The other workers stopped at global step %d; %d steps left to run '
                     'here', step, max(0, self._last_step - step))
        return step

    def before_run(self, run_context):
        return tf.train.SessionRunArgs(self._fetches)

    def after_run(self, run_context, run_values):
        values = run_values.results
        step, loss = values['global_step'], values['loss']
        self.global_step = step
        if not math.isfinite(loss):
            raise NonFiniteLossError(
                f'loss is {loss} at global step {step}: training stopped; the checkpoints '
                'already in train_dir are kept (try a lower --learning_rate)')
        self._runs += 1
        skipped = values.get('skipped_updates', 0)
        if skipped > self._skipped_in_session:
            self.skipped_updates += skipped - self._skipped_in_session
            self._skipped_in_session = skipped
            logging.warning('step %d: a gradient was Inf or NaN, update skipped; loss scale '
                            'now %g (%d updates skipped here so far)', step,
                            values['loss_scale'], self.skipped_updates)
        now = time.time()
        if self._alone_from is not None and step >= self._alone_from and not self._alone:
            step = self.global_step = self._wait_for_others(run_context.session)
        if self._last_step is not None and step >= self._last_step:
            run_context.request_stop()
        if self._last_time is None:  # The first step includes start-up: measure from it.
            self._last_time, self._last_global_step, self._last_runs = now, step, 1
            self._started = now
            return
        if self._runs % (self._every_n_steps * self._runs_per_step):
            return
        if step < self._last_global_step:  # A restarted chief restored an older checkpoint.
            self._last_time, self._last_global_step, self._last_runs = now, step, self._runs
            return
        elapsed = now - self._last_time
        examples_per_sec = (step - self._last_global_step) * self._examples_per_step / elapsed
        sec_per_step = elapsed * self._runs_per_step / (self._runs - self._last_runs)
        logging.info('step %d: loss = %.4f, learning rate = %.6g, %.1f examples/sec, '
                     '%.3f sec/step', step, loss, values['learning_rate'],
                     examples_per_sec, sec_per_step)
        if self._summary_dir:
            summary = tf.Summary(value=[
                tf.Summary.Value(tag='throughput/examples_per_sec', simple_value=examples_per_sec),
                tf.Summary.Value(tag='throughput/sec_per_step', simple_value=sec_per_step)])
            self._writer = tf.summary.FileWriterCache.get(self._summary_dir)
            self._writer.add_summary(summary, step)
        self._last_time, self._last_global_step, self._last_runs = now, step, self._runs

    def end(self, session):
        if self._writer is not None:
            self._writer.flush()


class SignalStop:
    """SIGTERM and SIGINT, while entered in the main thread, as a request to stop training.

    The first signal sets `signum` and calls the callbacks given to on_request (each in a
    thread of its own, which the interpreter waits for before it ends: a thread still in
    TensorFlow while the interpreter finalizes aborts the process); training then stops
    after its step in flight. A second signal, or `grace_secs` (seconds) passing after the
    first, ends the process at once with exit code 128 + the first signal's number and one
    line on stderr. Entered in another thread, it handles no signal. `peer_signum`: the
    signal another worker received, when they agreed to stop together (StopHook); None
    otherwise.
    """

    def __init__(self, grace_secs=GRACE_SECS):
        self.grace_secs = grace_secs
        self.signum = None
        self.peer_signum = None
        self._callbacks = []
        self._handlers = {}

    def on_request(self, callback):
        """Calls `callback()` when the first signal arrives (e.g. to release workers blocked
        on this one)."""
        self._callbacks.append(callback)

    def __enter__(self):
        if threading.current_thread() is not threading.main_thread():
            return self
        # Python runs handlers in the main thread only between bytecodes, never while it
        # waits in session.run; the wakeup socket hears the signal at once, in _watch.
        self._wakeup, self._heard = socket.socketpair()
        self._wakeup.setblocking(False)
        self._previous_wakeup = signal.set_wakeup_fd(self._wakeup.fileno(),
                                                     warn_on_full_buffer=False)
        self._handlers = {signum: signal.signal(signum, lambda *_: None)
                          for signum in (signal.SIGTERM, signal.SIGINT)}
        self._watcher = threading.Thread(target=self._watch, daemon=True, name='signal_stop')
        self._watcher.start()
        return self

    def __exit__(self, *exc_info):
        if not self._handlers:
            return
        for signum, handler in self._handlers.items():
            signal.signal(signum, handler)
        self._handlers = {}
        signal.set_wakeup_fd(self._previous_wakeup)
        self._wakeup.close()
        self._heard.shutdown(socket.SHUT_RDWR)  # Ends _watch.
        # Ended here, not while the interpreter finalizes: a thread dropping the last
        # reference to a TensorFlow session (the callbacks hold one) then aborts the process.
        self._watcher.join()

    def _watch(self):
        """Reads the signals the wakeup socket hears; enforces the grace period."""
        deadline = None
        while True:
            self._heard.settimeout(None if deadline is None else
                                   max(0.0, deadline - time.monotonic()))
            try:
                heard = self._heard.recv(1)
            except socket.timeout:
                self._exit(f'did not stop within {self.grace_secs:g} s of '
                           f'{signal.Signals(self.signum).name} (--grace_period_secs); '
                           'exiting now')
            except OSError:
                return
            if not heard:
                return
            if heard[0] not in (signal.SIGTERM, signal.SIGINT):
                continue
            if self.signum is not None:
                self._exit(f'second signal ({signal.Signals(heard[0]).name}): exiting now')
            self.signum = heard[0]
            deadline = time.monotonic() + self.grace_secs
            logging.warning('Received %s: stopping after the step in flight (within %g s)',
                            signal.Signals(self.signum).name, self.grace_secs)
            for callback in self._callbacks:
                threading.Thread(target=callback).start()

    def _exit(self, message):
        sys.stderr.write(f'{os.path.basename(sys.argv[0])}: {message}\n')
        sys.stderr.flush()
        os._exit(128 + self.signum)


class StopHook(tf.train.SessionRunHook):
    """Stops the session after the step in which `stop` (a SignalStop) got its signal.

    group: None, or for workers that step together (variable_update='collective'), an
    all_reduce.Group of one member per worker (its local device first) through which every
    step all-reduces the largest signal number any worker received; all then stop after
    the same step, so none is left waiting in a collective for the others.
    """

    def __init__(self, stop, group=None):
        self._stop = stop
        self._agreed = None
        if group is not None:
            with tf.device(group.local_devices[0]):
                self._received = tf.placeholder_with_default(0.0, [], name='signal_received')
                self._agreed = all_reduce.max_on_member(
                    self._received, group, all_reduce.next_instance_key())

    def after_create_session(self, session, coord):
        if self._agreed is None and self._stop.signum is not None:
            coord.request_stop()

    def before_run(self, run_context):
        if self._agreed is None:
            return None
        return tf.train.SessionRunArgs(self._agreed,
                                       feed_dict={self._received: self._stop.signum or 0})

    def after_run(self, run_context, run_values):
        if self._agreed is None:
            if self._stop.signum is not None:
                run_context.request_stop()
        elif run_values.results:
            if self._stop.signum is None:
                self._stop.peer_signum = int(run_values.results)
            run_context.request_stop()


def train(train_tensor, train_dir, monitor, master='', is_chief=True, scaffold=None, hooks=(),
          save_summaries_secs=600, save_interval_secs=600, keep_checkpoint_max=5, config=None,
          independent=False, stop=None, stop_group=None, watchdog=None):
    """Runs `train_tensor` until `monitor` (a MonitorHook) stops it at its last step.

    The monitor runs before the chief's summary and checkpoint hooks (so a non-finite loss
    is never saved); `hooks` run (and end) after them. scaffold: a tf.train.Scaffold
    (summary op, fine-tuning init_fn), None for the default; without a saver of its own, it
    saves with checkpoints.saver(keep_checkpoint_max), and the chief's saves are
    checkpoints.CheckpointSaverHook's (a failed save raises StorageError). The chief
    initializes the
    variables or restores them from train_dir's latest checkpoint (see
    checkpoints.resume_point for one that is unreadable); other workers wait for it, or with
    `independent` (variable_update='collective') initialize their own, which the graph's
    local init op then overwrites with the chief's. A session that fails is recreated
    (a ps task restarted), unless `independent`: aborted collectives cannot resume, and
    the error ends the run. Returns the last global step run, or None if no step ran (the
    checkpoint was at the last step).

    stop: the SignalStop to train under (None: one with the default grace period). On its
    signal the step in flight ends, the chief checkpoints that step and flushes its
    summaries, and Interrupted is raised; stop_group: see StopHook.

    watchdog: a watchdog.Watchdog probing the tasks this one needs while it trains (None:
    none); a worker other than the chief needs its while_waiting tasks too while it waits
    for the chief to initialize the variables.
    """
    stop = stop or SignalStop()
    scaffold = scaffold or tf.train.Scaffold()
    if scaffold.saver is None:
        scaffold = tf.train.Scaffold(saver=checkpoints.saver(keep_checkpoint_max),
                                     copy_from_scaffold=scaffold)
    all_hooks = [monitor, StopHook(stop, stop_group)]
    if is_chief:
        if save_summaries_secs:
            all_hooks.append(tf.train.SummarySaverHook(
                save_secs=save_summaries_secs, output_dir=train_dir, scaffold=scaffold))
        if save_interval_secs:
            all_hooks.append(checkpoints.CheckpointSaverHook(
                train_dir, save_interval_secs, scaffold))
    all_hooks += hooks
    with stop, watchdog or contextlib.nullcontext():
        if independent:
            session = tf.train.SingularMonitoredSession(
                hooks=all_hooks, scaffold=scaffold, master=master, config=config,
                checkpoint_dir=train_dir if is_chief else None)
        elif is_chief:
            session = tf.train.MonitoredSession(
                tf.train.ChiefSessionCreator(scaffold, master, config, checkpoint_dir=train_dir),
                hooks=all_hooks)
        else:
            session = tf.train.MonitoredSession(
                WorkerSessionCreator(scaffold, master, config, watchdog), hooks=all_hooks)
        with session:
            while not session.should_stop():
                session.run(train_tensor)
    if stop.signum or stop.peer_signum:
        raise _interrupted(stop, monitor.global_step, is_chief and save_interval_secs,
                           train_dir)
    return monitor.global_step


def _interrupted(stop, global_step, checkpointed, train_dir):
    """The Interrupted for training that `stop` ended at `global_step` (None: before any
    step); when `checkpointed` in train_dir, it names the step of that checkpoint."""
    at = 'before its first step' if global_step is None else f'at global step {global_step}'
    if stop.signum is None:
        signum = stop.peer_signum
        return Interrupted(f'stopped {at} with the other workers, one of which received '
                           f'{signal.Signals(signum).name}', signum)
    latest = checkpoints.latest(train_dir) if checkpointed else None
    if latest:  # Its step, which other workers' updates may have moved past global_step.
        at = f'at global step {latest.rsplit("-", 1)[1]}'
        where = f'checkpointed in {train_dir}: rerun to resume from it'
    else:
        where = 'not checkpointed here'
    return Interrupted(f'stopped by {signal.Signals(stop.signum).name} {at}; {where}',
                       stop.signum)


class WorkerSessionCreator(tf.train.SessionCreator):
    """TensorFlow's WorkerSessionCreator, checking every READY_POLL_SECS (instead of every
    30 s) whether the chief has initialized the variables; it waits as long as it takes, in
    `watchdog`'s waiting() (None: none)."""

    def __init__(self, scaffold, master, config, watchdog=None):
        self._scaffold = scaffold
        self._master = master
        self._config = config
        self._watchdog = watchdog

    def create_session(self):
        self._scaffold.finalize()
        manager = tf.train.SessionManager(
            local_init_op=self._scaffold.local_init_op,
            local_init_feed_dict=self._scaffold.local_init_feed_dict,
            ready_op=self._scaffold.ready_op,
            ready_for_local_init_op=self._scaffold.ready_for_local_init_op,
            graph=tf.get_default_graph(), recovery_wait_secs=READY_POLL_SECS)
        with self._watchdog.waiting() if self._watchdog else contextlib.nullcontext():
            return manager.wait_for_session(self._master, config=self._config)


class SyncReplicasHook(tf.train.SessionRunHook):
    """Runs a tf.train.SyncReplicasOptimizer's protocol so that every worker ends cleanly,
    and has the chief log how many gradients were dropped; replaces the optimizer's
    make_session_run_hook().

    The chief aggregates the gradients in a thread that ends quietly when the session closes
    (TensorFlow's queue runner keeps the chief waiting 2 minutes for it, then prints a
    traceback), and which the interpreter waits for before it ends (a thread still in
    TensorFlow while the interpreter finalizes aborts the process). When training ends, the
    chief puts `num_replicas` tokens in the token queue, so no worker stays blocked waiting
    for an update that will never come: pass this hook in train()'s `hooks`, which end after
    the checkpoint hook has saved the last step.

    Counting: every worker step pushes one gradient (or keeps it, stale) and then takes one
    token, besides the tokens of past steps it passes over, so the tokens the chief queued
    minus those unused (left in the queue or passed over) are the gradients pushed; each
    update applies `replicas_to_aggregate` of them, and the rest were dropped as stale (or
    were still waiting when training ended).

    With backup workers, a worker whose steps stay late (late_workers.late_steps) sits out
    updates before its next step (late_workers.sit_out_updates), waiting until the global
    step has passed them, or has stood still for twice the typical update (the update may
    wait for it), or training is stopping, and logs at the end how many of its steps were
    late and how many updates it sat out. last_step: the global step training ends at
    (None: none); a wait that reaches it leaves the local step as it is (see _sit_out).
    """

    def __init__(self, optimizer, is_chief, num_replicas, replicas_to_aggregate,
                 last_step=None):
        self._optimizer = optimizer
        self._last_step = last_step
        self._is_chief = is_chief
        self._num_replicas = num_replicas
        self._replicas_to_aggregate = replicas_to_aggregate

    def begin(self):
        self._session = None
        self._stopping = threading.Event()
        optimizer = self._optimizer
        optimizer.ready_for_local_init_op.mark_used()  # MonitoredSession waits for readiness.
        late = late_workers.late_steps()
        self._late_count = None if late is None else late.read_value()
        self._global_step = optimizer._global_step
        self._steps = self._steps_late = self._lateness = self._sat_out = 0
        self._seen = None  # (when, the global step) at the end of the last step.
        self._update_secs = None  # A moving average of the seconds between updates seen at
        # the ends of steps, in which each interval counts a quarter; None before one.
        if not self._is_chief:
            self._init_ops = [optimizer.local_step_init_op]
            return
        init_tokens_op = optimizer.get_init_tokens_op()
        self._init_ops = [optimizer.chief_init_op, init_tokens_op]
        self._release_op = _release_op(
            optimizer, max(self._num_replicas, self._replicas_to_aggregate))
        self._aggregate_op = optimizer.get_chief_queue_runner().enqueue_ops[0]
        self._tokens_unused, self._tokens_per_update, self._init_tokens = _token_counts(
            optimizer, init_tokens_op, self._aggregate_op, self._num_replicas)

    def after_create_session(self, session, coord):
        self._session = session
        if self._late_count is not None:  # Counted since the session began.
            self._late_count_before = session.run(self._late_count)
        if self._is_chief:
            self._tokens_queued = session.run(self._tokens_unused) + self._init_tokens
            self._updates = 0
        for op in self._init_ops:
            session.run(op)
        if self._is_chief:
            threading.Thread(target=self._aggregate, args=(session, coord),
                             name='sync_replicas_aggregation').start()

    def _aggregate(self, session, coord):
        """Applies an update each time replicas_to_aggregate fresh gradients have arrived."""
        while not coord.should_stop():
            try:
                session.run(self._aggregate_op)
            except Exception as e:  # noqa: BLE001 (handed to the training loop)
                if not coord.should_stop():  # Otherwise the closing session cancelled it.
                    coord.request_stop(e)
                return
            self._updates += 1
            self._tokens_queued += self._tokens_per_update

    def after_run(self, run_context, run_values):
        if self._late_count is None:
            return
        now = time.monotonic()
        count, step = run_context.session.run([self._late_count, self._global_step])
        if self._seen is not None and step > self._seen[1]:
            secs = (now - self._seen[0]) / (step - self._seen[1])
            self._update_secs = (secs if self._update_secs is None
                                 else (3 * self._update_secs + secs) / 4)
        self._seen = now, step
        self._steps += 1
        late = count > self._late_count_before
        self._late_count_before = count
        self._steps_late += late
        self._lateness = late_workers.lateness(self._lateness, late)
        updates = late_workers.sit_out_updates(self._lateness)
        if late and updates and self._update_secs is not None:
            self._sit_out(run_context.session, step, updates)

    def _sit_out(self, session, step, updates):
        """Waits, from global step `step`, until `updates` updates have passed or the global
        step has reached the last step, the global step has stood still for twice the
        typical update, or training is stopping; then moves the local step, which the token
        taken before the wait set, to the global step, so that the next step is not stale
        from its start, unless the global step has reached the last step (that step's
        gradient would make an update past it, or wait for one forever)."""
        until, moved_at = step + updates, time.monotonic()
        if self._last_step is not None:
            until = min(until, self._last_step)
        while (step < until and time.monotonic() - moved_at < 2 * self._update_secs
               and not self._stopping.wait(SIT_OUT_POLL_SECS)):
            previous, step = step, session.run(self._global_step)
            if step != previous:
                moved_at = time.monotonic()
                self._sat_out += step - previous
        if self._last_step is None or step < self._last_step:
            session.run(self._optimizer.local_step_init_op)

    def release(self):
        """On the chief, once its session exists, queues a token for every worker, so that a
        step blocked waiting for an update that may never come (the others stopping)
        finishes; on any worker, ends a wait sitting out updates: a SignalStop's
        on_request."""
        self._stopping.set()
        if self._is_chief and self._session is not None:
            try:
                self._session.run(self._release_op)
            except (tf.errors.OpError, RuntimeError):  # The session closed meanwhile.
                pass

    def end(self, session):
        if self._steps_late:
            logging.info('Late worker: %d of the %d steps here were stale (their gradients '
                         'dropped); it sat out %d updates', self._steps_late, self._steps,
                         self._sat_out)
        if not self._is_chief:
            return
        pushed = int(self._tokens_queued - session.run(self._tokens_unused))
        applied = self._updates * self._replicas_to_aggregate
        logging.info('Sync replicas: %d updates applied %d gradients; %d of the %d '
                     'gradients pushed were dropped as stale or left waiting at the end',
                     self._updates, applied, pushed - applied, pushed)
        session.run(self._release_op)


def _release_op(optimizer, count):
    """The op queuing `count` tokens that release the workers of `optimizer` (a
    SyncReplicasOptimizer) waiting for an update: at least one per worker, and as many as an
    update aggregates (the optimizer refuses fewer). A tf.train.SyncReplicasOptimizer's are
    of the next step, newer than any worker's local step (late_workers.take_newer_tokens_only
    needs that)."""
    if isinstance(optimizer, ordered_sync.OrderedSyncReplicasOptimizer):
        return optimizer.get_init_tokens_op(count)
    return late_workers.tokens_of_the_next_step(optimizer, count)


def _token_counts(optimizer, init_tokens_op, aggregate_op, num_replicas):
    """(the tokens queued that no gradient took, left in the queue or passed over by the
    steps of workers range(`num_replicas`), a scalar tensor; the tokens an update queues;
    those the start queues) of a SyncReplicasOptimizer whose start and update ops are
    `init_tokens_op` and `aggregate_op`."""
    if isinstance(optimizer, ordered_sync.OrderedSyncReplicasOptimizer):
        return optimizer.tokens_left, optimizer.tokens_per_update, optimizer.initial_tokens
    token_queue = aggregate_op.inputs[0]
    with tf.device(token_queue.device):
        unused = (tf.cast(tf.raw_ops.QueueSizeV2(handle=token_queue), tf.int64)
                  + late_workers.tokens_passed_over(optimizer, num_replicas))
    # Each enqueue_many op queues its input's static length.
    return unused, aggregate_op.inputs[1].shape[0], init_tokens_op.inputs[1].shape[0]
