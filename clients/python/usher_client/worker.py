"""A worker: runs jobs of the queues it has handlers for, as one agent.

It speaks the agent protocol as the Go client's Worker does
(client/worker.go, client/run.go): it leases up to ``concurrency`` jobs
at once (long-polling when there is no work; while busy it gathers free
slots for up to 2 ms so that it asks in batches), lists the jobs it holds
(``holding``) on its first lease, after a failed one and every 10 s, runs
each job in a thread with a time limit, renews its lease every third of
its length while jobs run (obeying the server's stops and shorter time
limits), confirms the start of strict-start jobs, reports results that
finish together in one call, and backs off with jitter when calls fail.
A graceful stop fetches no more work, lets the running jobs finish,
reports them and leaves.
"""

from __future__ import annotations

import enum
import json
import logging
import os
import queue as _queue
import socket
import threading
import time
import traceback
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from .client import Client, Duration, backoff, millis, seconds
from .errors import UsherError, retryable
from .types import JobRef, LeasedJob, RenewAnswer, Result

# Limits the server enforces on what a handler reports (jobtype/agent.go).
MAX_RESULT = 64 << 10
MAX_PROGRESS_MESSAGE = 256
MAX_SNOOZE_MS = 7 * 24 * 3600 * 1000

# How often a lease lists the jobs held even when no lease failed.
_HOLDING_EVERY = 10.0
# How long a busy worker waits for more free slots.
_GATHER_WAIT = 0.002
# Most results reported in one call.
_MAX_COMPLETE_BATCH = 1000
# Most output kept per job on this side (the server keeps the tail of
# --max-output, 64 KiB by default).
_MAX_OUTPUT = 1 << 20


class EndCause(str, enum.Enum):
    """Why a running job's time ended (:attr:`RunningJob.cause`)."""

    #: The job ran for its time limit.
    TIMEOUT = "job ran past its time limit"
    #: The server told the agent to stop the job (cancelled, downgraded past
    #: its new duration, or failed by the server past its time limit).
    STOPPED = "job stopped by the server"
    #: The worker was aborted (:meth:`Worker.abort`).
    ABORTED = "worker aborted"
    #: The agent's lease lapsed: the server released the job to run elsewhere.
    LEASE_LOST = "agent lease lapsed"


class JobEnded(Exception):
    """Raised by :meth:`RunningJob.check` once the job's time has ended."""

    def __init__(self, cause: EndCause) -> None:
        super().__init__(cause.value)
        self.cause = cause


class Snooze(Exception):
    """Raise it from a handler to run the job again after ``delay``
    (seconds or a timedelta, from 1 ms to a week), not counted as an
    attempt."""

    def __init__(self, delay: Duration) -> None:
        ms = millis(delay)
        if not 0 < seconds(delay) or ms > MAX_SNOOZE_MS:
            raise ValueError(f"snooze of {delay!r} is outside 1 ms to a week")
        super().__init__(f"snoozed for {seconds(delay)}s")
        self.ms = max(ms, 1)


class CancelJob(Exception):
    """Raise it from a handler to fail the job for good, whatever its retry
    policy says, with ``message`` as its error."""

    def __init__(self, message: str = "cancelled by its handler", exit_code: int = 1) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


class RunningJob:
    """A leased job, as a handler sees it.

    ``id``, ``queue``, ``attempt``, ``payload`` (the decoded JSON value)
    and ``timeout_ms`` come from the lease. The handler's return value
    becomes the job's ``result`` (any JSON value; None for none).
    """

    def __init__(self, task: "_Task") -> None:
        self._task = task
        leased = task.leased
        self.id: str = leased["id"]
        self.queue: str = leased.get("queue", "")
        self.attempt: int = leased.get("attempt", 0)
        self.payload: Any = leased.get("payload")
        self.timeout_ms: int = leased.get("timeoutMs", 0)
        self.confirm_start: bool = bool(leased.get("confirmStart"))

    @property
    def cause(self) -> Optional[EndCause]:
        """Why the job's time ended, or None while it may run on."""
        return self._task.cause

    @property
    def ended(self) -> bool:
        """Whether the job's time ended (its time limit, a stop by the
        server, an abort, a lost lease): the handler should return soon."""
        return self._task.cause is not None

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Sleeps up to ``timeout`` seconds, or until the job's time ends;
        returns whether it ended."""
        return self._task.ended_event.wait(timeout)

    def check(self) -> None:
        """Raises :class:`JobEnded` once the job's time ended."""
        cause = self._task.cause
        if cause is not None:
            raise JobEnded(cause)

    def progress(self, value: float, message: str = "") -> bool:
        """Tells the server how far the job got (value from 0 to 1, a
        message of at most 256 bytes); the latest is kept with the job.
        Returns whether the server ignored it (the job no longer runs
        here); raises UsherError when it refused it."""
        w = self._task.worker
        return w.client.progress(w.agent, self.id, self.attempt, value, message)

    def set_result(self, value: Any) -> None:
        """Keeps value (JSON) as the job's result, reported with its end,
        also when the handler then fails; a return value other than None
        replaces it."""
        self._task.set_result(value)

    def write(self, text: str) -> None:
        """Appends text to the job's output (the server keeps its tail)."""
        self._task.write(text)


#: A handler runs one job; its return value is the job's result. Raising
#: fails the job (exit code 1, or the exception's ``exit_code`` or
#: ``returncode``); :class:`Snooze` and :class:`CancelJob` say more.
Handler = Callable[[RunningJob], Any]


class _Task:
    """One job of the worker: leased, then running, then reported."""

    def __init__(self, worker: "Worker", leased: LeasedJob) -> None:
        self.worker = worker
        self.leased = leased
        self.ref: Tuple[str, int] = (leased["id"], leased.get("attempt", 0))
        self.cond = threading.Condition()
        self.ended_event = threading.Event()
        self.start = time.monotonic()
        ms = leased.get("timeoutMs", 0)
        self.limit: Optional[float] = ms / 1000 if ms > 0 else None
        self.cause: Optional[EndCause] = None
        self.cause_text = ""
        self.done = False
        self.value: Any = None
        self.exc: Optional[BaseException] = None
        self.tb = ""
        self.result: Any = None
        self.has_result = False
        self.output: List[str] = []
        self.output_len = 0

    def end(self, cause: EndCause, text: Optional[str] = None) -> None:
        """Ends the job's time (the first cause counts)."""
        with self.cond:
            if self.cause is None:
                self.cause = cause
                self.cause_text = text or cause.value
                self.ended_event.set()
            self.cond.notify_all()

    def shorten(self, limit: float) -> None:
        """Sets a shorter time limit, counted from the job's start."""
        with self.cond:
            if self.limit is None or limit < self.limit:
                self.limit = limit
                self.cond.notify_all()

    def set_result(self, value: Any) -> None:
        with self.cond:
            self.result, self.has_result = value, True

    def write(self, text: str) -> None:
        with self.cond:
            self.output.append(text)
            self.output_len += len(text)
            if self.output_len > 2 * _MAX_OUTPUT:
                joined = "".join(self.output)[-_MAX_OUTPUT:]
                self.output, self.output_len = [joined], len(joined)

    def call(self, handler: Handler, job: RunningJob) -> None:
        """Runs the handler (in its own thread) and records its outcome."""
        value: Any = None
        exc: Optional[BaseException] = None
        tb = ""
        try:
            value = handler(job)
        except BaseException as e:  # a handler's failure of any kind fails its job
            exc, tb = e, traceback.format_exc()
        with self.cond:
            self.value, self.exc, self.tb, self.done = value, exc, tb, True
            self.cond.notify_all()

    def await_outcome(self, grace: float) -> bool:
        """Waits for the handler to return, ending the job's time at its
        limit; returns True when the handler did not return within grace
        after the job's time ended (it is abandoned)."""
        with self.cond:
            grace_until: Optional[float] = None
            while not self.done:
                now = time.monotonic()
                if self.cause is None and self.limit is not None and now >= self.start + self.limit:
                    self.cause = EndCause.TIMEOUT
                    self.cause_text = f"{EndCause.TIMEOUT.value} ({self.limit:g}s)"
                    self.ended_event.set()
                if self.cause is not None and grace_until is None:
                    grace_until = now + grace
                if grace_until is not None and now >= grace_until:
                    return True
                until = grace_until if grace_until is not None else (
                    self.start + self.limit if self.limit is not None else None)
                self.cond.wait(None if until is None else max(until - now, 0.0))
            return False


def _exit_code(exc: BaseException) -> int:
    """The exception's own exit code (``exit_code`` or ``returncode``, not
    0), else 1."""
    for attr in ("exit_code", "returncode"):
        code = getattr(exc, attr, None)
        if isinstance(code, int) and not isinstance(code, bool) and code != 0:
            return code
    return 1


def _result_problem(value: Any) -> str:
    """Why the server would refuse value as a job's result ("" when it
    would not): not JSON, or over MAX_RESULT bytes."""
    try:
        size = len(json.dumps(value, allow_nan=False).encode())
    except (TypeError, ValueError) as e:
        return f"the job's result is not JSON: {e}"
    if size > MAX_RESULT:
        return f"the job's result of {size} bytes is over the limit of {MAX_RESULT}"
    return ""


def _error_text(exc: BaseException, cause_text: str) -> str:
    """A failure's text: the exception, led by the reason the job's time
    ended when it did."""
    if isinstance(exc, JobEnded):
        return cause_text or exc.cause.value
    if isinstance(exc, CancelJob):
        text = exc.message
    else:
        text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return f"{cause_text}: {text}" if cause_text else text


class Worker:
    """Runs jobs of the queues it has handlers for, as one agent.

    ``handlers`` maps queue names to handlers; without ``default`` the
    worker asks the server for jobs of those queues only, with it for any
    queue it serves. ``agent`` names it to the server, unique per process
    (default: host name and process id). ``capabilities`` are offered to
    queues' requirements. ``concurrency`` jobs run at once, each in its own
    thread. ``wait`` is how long one lease request waits for work (seconds,
    at most 60; 0 polls). ``grace`` is how long a handler may take to
    return after its job's time ended before the job is reported failed and
    the handler abandoned. ``renew_interval`` defaults to a third of the
    lease the server grants; ``max_backoff`` caps the wait between failed
    calls.

    :meth:`run` serves until :meth:`stop` (a graceful stop: running jobs
    finish and are reported, then the agent leaves) or :meth:`abort`
    (running jobs' time ends at once). A KeyboardInterrupt in run() stops
    gracefully; a second one aborts. A Worker runs once; stop() before
    run() makes run() stop at once.
    """

    def __init__(self, client: Client, handlers: Optional[Mapping[str, Handler]] = None, *,
                 default: Optional[Handler] = None, agent: Optional[str] = None,
                 capabilities: Sequence[str] = (), concurrency: int = 1, wait: float = 30.0,
                 grace: float = 5.0, renew_interval: Optional[float] = None,
                 max_backoff: float = 10.0, logger: Optional[logging.Logger] = None) -> None:
        self.client = client
        self.handlers: Dict[str, Handler] = dict(handlers or {})
        self.default = default
        self.agent = agent or f"{socket.gethostname()}-{os.getpid()}"
        self.capabilities = list(capabilities)
        self.slots = max(concurrency, 1)
        self.wait = min(max(wait, 0.0), 60.0)
        self.grace = grace if grace > 0 else 5.0
        self.renew_interval = renew_interval
        self.max_backoff = max_backoff if max_backoff > 0 else 10.0
        self.log = logger or logging.getLogger("usher_client.worker")
        self._cond = threading.Condition()  # guards everything below
        self._held: Dict[Tuple[str, int], None] = {}  # leased, not yet reported
        self._running: Dict[Tuple[str, int], _Task] = {}
        self._ran = False
        self._stopping = False
        self._aborted = False
        self._left = False
        self._fatal: Optional[BaseException] = None
        self._stop_event = threading.Event()
        self._renew_stop = threading.Event()
        self._renew_wake = threading.Event()  # the lease's length changed, or stopping
        self._results: "_queue.Queue[Optional[Result]]" = _queue.Queue()
        self._lease_s = 30.0

    def handler(self, queue: str) -> Callable[[Handler], Handler]:
        """A decorator that registers a function as the handler of a queue."""
        def register(fn: Handler) -> Handler:
            self.handlers[queue] = fn
            return fn
        return register

    # --- control ---------------------------------------------------------

    def stop(self) -> None:
        """Stops gracefully: no more work is fetched; running jobs finish
        and are reported, then the agent leaves and run() returns. Safe
        from any thread and from a signal handler."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        self._stop_event.set()

    def abort(self) -> None:
        """Ends the running jobs' time at once (cause ABORTED; they are
        reported failed once their handlers return, or after grace) and
        stops."""
        with self._cond:
            self._aborted = True
            tasks = list(self._running.values())
        for t in tasks:
            t.end(EndCause.ABORTED)
        self.stop()

    def run(self) -> None:
        """Serves jobs until stop() or abort(). Raises UsherError, after a
        graceful stop, when the server refused the agent's lease (a bad
        token, role or request: 400, 401, 403)."""
        if not self.handlers and self.default is None:
            raise ValueError("worker: no handlers")
        with self._cond:
            if self._ran:
                raise RuntimeError("worker: run() was called before; make a new Worker")
            self._ran = True
        completer = threading.Thread(target=self._completer, name="usher-completer", daemon=True)
        renewer = threading.Thread(target=self._renewer, name="usher-renewer", daemon=True)
        fetcher = threading.Thread(target=self._fetch, name="usher-fetch", daemon=True)
        for t in (completer, renewer, fetcher):
            t.start()
        self.log.info("worker %s: serving %d slots", self.agent, self.slots)
        try:
            with self._cond:
                while not self._stopping:
                    self._cond.wait()
        except KeyboardInterrupt:
            self.stop()
        self._finish()
        self._renew_stop.set()
        self._renew_wake.set()
        renewer.join()
        self._results.put(None)
        completer.join()
        self._leave()
        # The leave ends a lease request waiting on the server, if any.
        fetcher.join(timeout=2.0)
        if self._fatal is not None:
            raise self._fatal

    def _finish(self) -> None:
        """Waits until every job held was reported (a second
        KeyboardInterrupt aborts), then marks the agent gone, so that a
        lease answered from now on is not run."""
        while True:
            try:
                with self._cond:
                    self.log.info("worker %s: stopped fetching; waiting for %d running jobs",
                                  self.agent, len(self._running))
                    while self._held:
                        self._cond.wait()
                    self._left = True
                    return
            except KeyboardInterrupt:
                self.abort()

    def _leave(self) -> None:
        try:
            self.client.leave(self.agent)
        except Exception as e:
            if not (isinstance(e, UsherError) and e.status == 404):
                self.log.warning("worker %s: leaving failed: %s", self.agent, e)
                return
        self.log.info("worker %s: left", self.agent)

    # --- fetching work ---------------------------------------------------

    def _queues(self) -> Optional[List[str]]:
        return None if self.default is not None else sorted(self.handlers)

    def _gather(self) -> int:
        """Returns the free slots once there are some (0 when stopping).
        While jobs run and only a few slots are free, it waits up to 2 ms
        for more, so that a busy worker asks for work in batches."""
        with self._cond:
            deadline: Optional[float] = None
            while not self._stopping:
                free = self.slots - len(self._held)
                if free > 0 and (free >= max(self.slots // 8, 1) or free == self.slots):
                    return free
                if free > 0:
                    now = time.monotonic()
                    if deadline is None:
                        deadline = now + _GATHER_WAIT
                    elif now >= deadline:
                        return free
                    self._cond.wait(deadline - now)
                else:
                    deadline = None
                    self._cond.wait()
            return 0

    def _holding(self) -> List[JobRef]:
        with self._cond:
            return [{"id": i, "attempt": a} for (i, a) in self._held]

    def _fetch(self) -> None:
        """Leases work for the free slots until the worker stops."""
        fails = idle = 0
        listed: Optional[float] = None  # when a lease last listed the jobs held
        try:
            while True:
                free = self._gather()
                if free == 0:
                    return
                holding = None
                if fails > 0 or listed is None or time.monotonic() - listed > _HOLDING_EVERY:
                    holding, listed = self._holding(), time.monotonic()
                began = time.monotonic()
                try:
                    ans = self.client.lease(self.agent, slots=self.slots, max_jobs=free,
                                            capabilities=self.capabilities, queues=self._queues(),
                                            holding=holding, wait=self.wait)
                except Exception as e:  # a transport error, a refusal, an answer that is not JSON
                    if isinstance(e, UsherError) and e.status in (400, 401, 403):
                        self.log.error("worker %s: the server refused the lease: %s", self.agent, e)
                        self._fatal = e
                        self.stop()
                        return
                    # The answer may be lost with jobs in it: the next lease
                    # lists the jobs held, so that the server hands those back.
                    d = backoff(fails, self.max_backoff)
                    fails += 1
                    self.log.warning("worker %s: lease failed (%s); backing off %.2fs", self.agent, e, d)
                    self._stop_event.wait(d)
                    continue
                fails = 0
                self._set_lease(ans.get("leaseMs"))
                jobs = ans.get("jobs") or []
                with self._cond:
                    if self._left:
                        if jobs:
                            self.log.warning("worker %s: %d jobs came after leaving; not run",
                                             self.agent, len(jobs))
                        return
                    for job in jobs:
                        self._start(job)
                idle = self._idle_wait(len(jobs), time.monotonic() - began, idle)
        except Exception:  # a bug here must not hang run(): stop and say why
            self.log.exception("worker %s: fetching work failed", self.agent)
            self.stop()

    def _idle_wait(self, jobs: int, took: float, idle: int) -> int:
        """Backs off after an answer with no jobs that came back without
        waiting, so that an idle worker does not spin; returns the new
        count of such answers."""
        if jobs > 0 or (self.wait > 0 and took >= self.wait / 2):
            return 0
        self._stop_event.wait(backoff(idle, min(self.max_backoff, 2.0)))
        return idle + 1

    # --- running jobs ----------------------------------------------------

    def _start(self, leased: LeasedJob) -> None:
        """Takes a slot for a leased job and runs it (with _cond held)."""
        task = _Task(self, leased)
        self._held[task.ref] = None
        if self._aborted:
            task.end(EndCause.ABORTED)
        threading.Thread(target=self._execute, args=(task,), name=f"usher-job-{leased['id']}",
                         daemon=True).start()

    def _execute(self, task: _Task) -> None:
        """Runs a job and hands its result to the completer, whatever
        happens: a slot is freed only by a report."""
        res: Result = {"id": task.ref[0], "attempt": task.ref[1], "exitCode": 1}
        try:
            res = self._run_task(task)
        except Exception as e:  # a bug here must not keep the slot forever
            self.log.exception("worker %s: running job %s failed", self.agent, task.ref[0])
            res["error"] = f"worker {self.agent}: {type(e).__name__}: {e}"
        finally:
            with self._cond:
                self._running.pop(task.ref, None)
            task.end(EndCause.STOPPED)  # wakes a handler still waiting on job.wait()
            self._results.put(res)

    def _run_task(self, task: _Task) -> Result:
        """Runs a job's handler in a thread of its own and returns the
        job's result. A handler that does not return within grace after
        the job's time ended is abandoned and its job reported failed."""
        queue_name = task.leased.get("queue", "")
        handler = self.handlers.get(queue_name) or self.default
        if handler is None:
            return {"id": task.ref[0], "attempt": task.ref[1], "exitCode": 1,
                    "error": f"agent {self.agent} has no handler for queue {queue_name!r}"}
        with self._cond:
            self._running[task.ref] = task
        job = RunningJob(task)
        threading.Thread(target=task.call, args=(handler, job), name=f"usher-handler-{task.ref[0]}",
                         daemon=True).start()
        if job.confirm_start:
            self._confirm_start(task)
        abandoned = task.await_outcome(self.grace)
        if abandoned:
            self.log.error("worker %s: the handler of job %s did not return within %gs after %s; "
                           "abandoning it", self.agent, task.ref[0], self.grace, task.cause_text)
        return self._result(task, abandoned)

    def _result(self, task: _Task, abandoned: bool) -> Result:
        """Turns a handler's outcome into the job's result."""
        with task.cond:
            res: Result = {"id": task.ref[0], "attempt": task.ref[1], "exitCode": 0}
            output = "".join(task.output)
            exc, cause_text = task.exc, task.cause_text
            value, has_value = task.result, task.has_result
            if not abandoned and task.value is not None and exc is None:
                value, has_value = task.value, True
        if abandoned:
            res["exitCode"] = 1
            res["error"] = (f"{cause_text}; the handler did not return within {self.grace:g}s "
                            "after that and was abandoned")
            has_value = False
        elif isinstance(exc, Snooze):
            res["snoozeMs"] = exc.ms
        elif exc is not None:
            res["exitCode"] = _exit_code(exc)
            res["error"] = _error_text(exc, cause_text)
            if isinstance(exc, CancelJob):
                res["cancel"] = True
            elif not isinstance(exc, JobEnded):
                output += task.tb
        if has_value:
            problem = _result_problem(value)
            if problem:
                # A result the server would refuse fails the job instead
                # (a refused report would lose the whole batch).
                res.pop("snoozeMs", None)
                res["exitCode"] = res["exitCode"] or 1
                res["error"] = problem
            else:
                res["result"] = value
        if output:
            res["output"] = output[-_MAX_OUTPUT:]
        return res

    def _confirm_start(self, task: _Task) -> None:
        """Confirms a strict-start job's start, trying a few times."""
        for fails in range(6):
            try:
                self.client.started(self.agent, task.ref[0], task.ref[1])
                return
            except Exception as e:
                if task.cause is not None:
                    return
                if not retryable(e) or fails >= 5:
                    self.log.warning("worker %s: could not confirm the start of job %s: %s",
                                     self.agent, task.ref[0], e)
                    return
                if task.ended_event.wait(backoff(fails, self.max_backoff)):
                    return

    # --- reporting -------------------------------------------------------

    def _completer(self) -> None:
        """Reports results: whatever finished while the previous report was
        on its way goes in one call."""
        closed = False
        while not closed:
            first = self._results.get()
            if first is None:
                return
            batch = [first]
            while len(batch) < _MAX_COMPLETE_BATCH:
                try:
                    res = self._results.get_nowait()
                except _queue.Empty:
                    break
                if res is None:
                    closed = True
                    break
                batch.append(res)
            self._report(batch)

    def _report(self, batch: List[Result]) -> None:
        """Sends a batch of results, retrying transport and server errors
        with backoff until acknowledged, refused, or the worker aborts; then
        frees the batch's slots."""
        try:
            n = 0
            while True:
                try:
                    self.client.complete(self.agent, batch, timeout=30.0)
                    return
                except Exception as e:  # retryable() says which may succeed again
                    if not retryable(e) or self._aborted:
                        self.log.error("worker %s: reporting %d results failed; they are lost: %s",
                                       self.agent, len(batch), e)
                        return
                    d = backoff(n, self.max_backoff)
                    n += 1
                    self.log.warning("worker %s: reporting results failed (%s); retrying in %.2fs",
                                     self.agent, e, d)
                    time.sleep(d)
        finally:
            with self._cond:
                for res in batch:
                    self._held.pop((res["id"], res["attempt"]), None)
                self._cond.notify_all()

    # --- the lease -------------------------------------------------------

    def _renewer(self) -> None:
        """Renews the lease every third of its length while jobs run, and
        applies the server's stops and new time limits, until every job
        held was reported. A new lease length (the first lease's answer)
        takes effect at once, not after a wait of the old one."""
        fails = 0
        last = time.monotonic()
        while not self._renew_stop.is_set():
            every = self.renew_interval or max(self._lease_s / 3, 0.01)
            if fails > 0:
                every = min(every, backoff(fails - 1, every))
            left = last + every - time.monotonic()
            if left > 0:
                self._renew_wake.wait(left)
                self._renew_wake.clear()
                continue
            last = time.monotonic()
            with self._cond:
                busy = bool(self._running)
            if not busy:
                fails = 0
                continue
            fails = 0 if self._renew() else fails + 1

    def _renew(self) -> bool:
        """Renews the lease once; returns whether it got an answer."""
        try:
            ans = self.client.renew(self.agent, timeout=max(self._lease_s, 1.0))
        except UsherError as e:
            if e.status == 404:
                self.log.error("worker %s: the lease lapsed; the server released this agent's jobs",
                               self.agent)
                self._end_all(EndCause.LEASE_LOST)
                return True
            self.log.warning("worker %s: renewing the lease failed: %s", self.agent, e)
            return False
        except Exception as e:  # a transport error, or an answer that is not JSON
            self.log.warning("worker %s: renewing the lease failed: %s", self.agent, e)
            return False
        self._set_lease(ans.get("leaseMs"))
        self._apply(ans)
        return True

    def _set_lease(self, ms: Optional[int]) -> None:
        """Keeps the lease's length the server granted; a change wakes the
        renewer."""
        if ms and ms / 1000 != self._lease_s:
            self._lease_s = ms / 1000
            self._renew_wake.set()

    def _apply(self, ans: RenewAnswer) -> None:
        """Ends the jobs the server stopped and shortens the limits it
        lowered."""
        with self._cond:
            running = dict(self._running)
        for ref in ans.get("stop") or []:
            t = running.get((ref["id"], ref["attempt"]))
            if t is not None:
                self.log.info("worker %s: the server stopped job %s", self.agent, ref["id"])
                t.end(EndCause.STOPPED)
        for to in ans.get("timeouts") or []:
            t = running.get((to["id"], to["attempt"]))
            if t is not None:
                t.shorten(to["timeoutMs"] / 1000)

    def _end_all(self, cause: EndCause) -> None:
        with self._cond:
            tasks = list(self._running.values())
        for t in tasks:
            t.end(cause)
