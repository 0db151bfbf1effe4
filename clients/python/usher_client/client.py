"""The client of /v1: one method per endpoint (docs/api.md)."""

from __future__ import annotations

import datetime as _dt
import json
import os
import random
import secrets
import time
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Union, cast
from urllib.parse import quote

import httpx

from .errors import UsherError, retryable
from .types import (Ack, ActionAnswer, Backoff, EnqueueAnswer, Job, JobPage, JobRef, JobSpec, KeyLimit,
                    LeaseAnswer, Queue, RenewAnswer, Result, RetryPolicy, Stats,
                    SubmittedWorkflow, Token, UniqueOpts, Workflow, WorkflowEdge)

#: A duration: seconds, or a timedelta.
Duration = Union[float, int, _dt.timedelta]
#: A point in time: an aware datetime, or an RFC 3339 string as it is.
Time = Union[_dt.datetime, str]

#: The header of ``POST /v1/jobs`` that gives the request a key of its own.
IDEMPOTENCY_KEY_HEADER = "Idempotency-Key"

# How often an enqueue is sent when its answer was lost or was a
# server-side failure, and the longest wait between tries (as the Go
# client: 5 tries, 0.1 s doubling to 2 s).
_ENQUEUE_TRIES = 5
_ENQUEUE_MAX_WAIT = 2.0

# The longest wait of one GET /v1/workflows/{id}?wait= (the server's cap).
_WORKFLOW_WAIT_STEP = 60.0

# Added to a long-poll's own wait for the HTTP read timeout.
_LONG_POLL_SLACK = 30.0

_MISSING: Any = object()


def seconds(d: Duration) -> float:
    """A duration in seconds."""
    if isinstance(d, _dt.timedelta):
        return d.total_seconds()
    return float(d)


def millis(d: Duration) -> int:
    """A duration in whole milliseconds."""
    return int(round(seconds(d) * 1000))


def rfc3339(t: Time) -> str:
    """A time as RFC 3339; a naive datetime is refused (its zone is
    unknown)."""
    if isinstance(t, str):
        return t
    if t.tzinfo is None or t.utcoffset() is None:
        raise ValueError(f"time {t!r} has no time zone; give an aware datetime (e.g. tzinfo=timezone.utc)")
    return t.isoformat()


def backoff(n: int, max_wait: float) -> float:
    """The jittered wait before try n (0-based) of a failed call: 0.1 s
    doubling up to max_wait, each wait between half and all of it."""
    d = max_wait if n >= 20 else min(0.1 * (1 << n), max_wait)
    return d / 2 + random.uniform(0, d / 2)


def job_spec(queue: str, payload: Any = _MISSING, *, name: Optional[str] = None,
             tier: Optional[str] = None, timeout: Optional[Duration] = None,
             priority: Optional[int] = None, keys: Optional[Sequence[str]] = None,
             group: Optional[str] = None, mode: Optional[str] = None,
             after: Optional[Sequence[str]] = None, run_after_failure: bool = False,
             retry: Optional[RetryPolicy] = None, backoff: Optional[Backoff] = None,
             run_at: Optional[Time] = None, delay: Optional[Duration] = None,
             deadline: Optional[Time] = None, idempotency_key: Optional[str] = None,
             unique: Optional[UniqueOpts] = None, tags: Optional[Sequence[str]] = None,
             metadata: Optional[Mapping[str, Any]] = None) -> JobSpec:
    """Builds a job spec (the wire form of docs/api.md, "Jobs") from
    keyword arguments; only the arguments given become fields.

    ``payload`` is any JSON value. ``timeout`` and ``delay`` are durations
    (seconds or a timedelta); ``run_at`` and ``deadline`` aware datetimes
    or RFC 3339 strings. ``run_at`` and ``delay`` both schedule the first
    run: give one. ``name`` and ``after`` (names) are for a workflow's
    jobs; outside a workflow ``after`` lists job ids.
    """
    if run_at is not None and delay is not None:
        raise ValueError("give run_at or delay, not both")
    spec: Dict[str, Any] = {"queue": queue}
    if name is not None:
        spec["name"] = name
    if payload is not _MISSING:
        spec["payload"] = payload
    fields: Dict[str, Any] = {
        "tier": tier, "priority": priority, "group": group, "mode": mode, "retry": retry,
        "backoff": backoff, "idempotencyKey": idempotency_key, "unique": unique,
    }
    for k, v in fields.items():
        if v is not None:
            spec[k] = v
    for k, seq in (("keys", keys), ("after", after), ("tags", tags)):
        if seq is not None:
            if isinstance(seq, str):
                raise TypeError(f"{k} is a sequence of strings, not one string")
            spec[k] = list(seq)
    if metadata is not None:
        spec["metadata"] = dict(metadata)
    if timeout is not None:
        spec["timeoutMs"] = millis(timeout)
    if run_after_failure:
        spec["runAfterFailure"] = True
    if run_at is not None:
        spec["runAt"] = rfc3339(run_at)
    if delay is not None:
        spec["delayMs"] = millis(delay)
    if deadline is not None:
        spec["deadline"] = rfc3339(deadline)
    return cast(JobSpec, spec)


class Client:
    """Calls one usher server's /v1 API with one token.

    ``base_url`` defaults to ``$USHER_SERVER`` (else
    ``http://localhost:8080``), ``token`` to ``$USHER_TOKEN``; the token is
    sent as ``Authorization: Bearer``. ``timeout`` is the HTTP timeout of
    ordinary calls in seconds; long polls (a lease, a workflow wait) get
    their wait on top. ``transport`` replaces httpx's (a proxy, a test
    transport). A Client is safe to share between threads; close it (or
    use it as a context manager) to free its connections.

    Errors the server answers raise :class:`UsherError`; transport
    failures raise ``httpx.TransportError``.
    """

    def __init__(self, base_url: Optional[str] = None, token: Optional[str] = None, *,
                 timeout: float = 30.0, transport: Optional[httpx.BaseTransport] = None) -> None:
        if base_url is None:
            base_url = os.environ.get("USHER_SERVER") or "http://localhost:8080"
        if token is None:
            token = os.environ.get("USHER_TOKEN") or None
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.base_url = base_url.rstrip("/")
        self._timeout = timeout
        self._http = httpx.Client(base_url=self.base_url, headers=headers, timeout=timeout,
                                  transport=transport)

    def close(self) -> None:
        """Closes the client's connections."""
        self._http.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- plumbing -------------------------------------------------------

    def _call(self, method: str, path: str, body: Any = None, *,
              params: Optional[Mapping[str, str]] = None,
              headers: Optional[Mapping[str, str]] = None,
              timeout: Optional[float] = None) -> Any:
        """Sends one request with body as JSON (None: no body) and returns
        the decoded answer (None for an empty one)."""
        hdrs = dict(headers or {})
        content = None
        if body is not None:
            content = json.dumps(body, allow_nan=False, separators=(",", ":")).encode()
            hdrs["Content-Type"] = "application/json"
        resp = self._http.request(method, path, content=content, params=params, headers=hdrs,
                                  timeout=timeout if timeout is not None else self._timeout)
        if not 200 <= resp.status_code <= 299:
            raise UsherError.from_response(resp)
        if resp.status_code == 204 or not resp.content:
            return None
        return resp.json()

    @staticmethod
    def _seg(s: str) -> str:
        """One path segment (a queue name, job id), escaped."""
        return quote(str(s), safe="")

    # --- jobs ------------------------------------------------------------

    def enqueue(self, queue: str, payload: Any = _MISSING, *, tier: Optional[str] = None,
                timeout: Optional[Duration] = None, priority: Optional[int] = None,
                keys: Optional[Sequence[str]] = None, group: Optional[str] = None,
                mode: Optional[str] = None, after: Optional[Sequence[str]] = None,
                run_after_failure: bool = False, retry: Optional[RetryPolicy] = None,
                backoff: Optional[Backoff] = None, run_at: Optional[Time] = None,
                delay: Optional[Duration] = None, deadline: Optional[Time] = None,
                idempotency_key: Optional[str] = None, unique: Optional[UniqueOpts] = None,
                tags: Optional[Sequence[str]] = None,
                metadata: Optional[Mapping[str, Any]] = None) -> str:
        """Submits one job and returns its id; the arguments are those of
        :func:`job_spec` (``delay=60``, ``run_at=…``,
        ``idempotency_key="order-17"``, ``tags=[…]``, …). A job that
        existed already (its idempotency key, or a unique job alike) gives
        that job's id; :meth:`enqueue_many` tells them apart."""
        spec = job_spec(queue, payload, tier=tier, timeout=timeout, priority=priority, keys=keys,
                        group=group, mode=mode, after=after, run_after_failure=run_after_failure,
                        retry=retry, backoff=backoff, run_at=run_at, delay=delay,
                        deadline=deadline, idempotency_key=idempotency_key, unique=unique,
                        tags=tags, metadata=metadata)
        return self.enqueue_many([spec])["ids"][0]

    def enqueue_many(self, jobs: Sequence[JobSpec], *, request_key: Optional[str] = None) -> EnqueueAnswer:
        """Submits jobs in one request, all or none, and returns their ids
        in the given order, with ``existing`` marking those that were there
        before.

        The request carries an idempotency key of its own
        (``request_key``, else a random one) in its ``Idempotency-Key``
        header, so that trying again after a lost answer never creates a
        job twice: a transport error, 408, 429 or 5xx is tried again with
        the same key, up to 5 tries with backoff (0.1 s doubling, at most
        2 s), as the Go client does. A refused request (e.g. 400 naming
        ``jobs[i].field``) raises at once and creates nothing.
        """
        key = request_key if request_key is not None else secrets.token_hex(16)
        body = {"jobs": list(jobs)}
        for attempt in range(_ENQUEUE_TRIES):
            if attempt:
                time.sleep(backoff(attempt - 1, _ENQUEUE_MAX_WAIT))
            try:
                return cast(EnqueueAnswer, self._call("POST", "/v1/jobs", body,
                                                      headers={IDEMPOTENCY_KEY_HEADER: key}))
            except (UsherError, httpx.TransportError) as e:
                if not retryable(e) or attempt == _ENQUEUE_TRIES - 1:
                    raise
        raise AssertionError("unreachable")

    def enqueue_targets(self, queue: str, targets: Union[str, Sequence[str]]) -> List[str]:
        """Submits one job per target (a line of text) to queue, keyed by
        network (docs/api.md); returns their ids in order."""
        text = targets if isinstance(targets, str) else "\n".join(targets)
        resp = self._http.post(f"/v1/queues/{self._seg(queue)}/targets", content=text.encode(),
                               headers={"Content-Type": "text/plain; charset=utf-8"})
        if not 200 <= resp.status_code <= 299:
            raise UsherError.from_response(resp)
        return list(resp.json()["ids"])

    def job(self, job_id: str) -> Job:
        """Returns one job (404 for an unknown id)."""
        return cast(Job, self._call("GET", f"/v1/jobs/{self._seg(job_id)}"))

    def jobs(self, *, queue: Optional[str] = None, state: Optional[str] = None,
             workflow: Optional[str] = None, key: Optional[str] = None, tag: Optional[str] = None,
             q: Optional[str] = None, from_: Optional[Time] = None, to: Optional[Time] = None,
             order: Optional[str] = None, limit: Optional[int] = None,
             after: Optional[str] = None) -> JobPage:
        """Returns one page of the jobs the filters select. ``key``, ``tag``,
        ``q`` (an id or a tag prefix), ``from_``/``to`` (bounds on
        createdAt) and ``order`` (``asc`` or ``desc``) are passed as given;
        ``after`` is the ``next`` of the previous page."""
        params: Dict[str, str] = {}
        for k, v in (("queue", queue), ("state", state), ("workflow", workflow), ("key", key),
                     ("tag", tag), ("q", q), ("order", order), ("after", after)):
            if v is not None:
                params[k] = v
        if from_ is not None:
            params["from"] = rfc3339(from_)
        if to is not None:
            params["to"] = rfc3339(to)
        if limit is not None:
            params["limit"] = str(limit)
        return cast(JobPage, self._call("GET", "/v1/jobs", params=params))

    def iter_jobs(self, **filters: Any) -> Iterator[Job]:
        """Yields every job the filters of :meth:`jobs` select, page after
        page (from ``after`` on, when given)."""
        while True:
            page = self.jobs(**filters)
            got = page.get("jobs") or []
            yield from got
            nxt = page.get("next")
            if not nxt:  # a short page, even an empty one, may have a next
                return
            filters["after"] = nxt

    def cancel(self, job_id: str) -> Job:
        """Cancels a job that has not finished and returns it (409 for a
        finished one); a running job is told to stop at its agent's next
        renewal."""
        return cast(Job, self._call("POST", f"/v1/jobs/{self._seg(job_id)}/cancel"))

    def retry(self, job_id: str) -> Job:
        """Queues a failed or cancelled job again with fresh attempts."""
        return cast(Job, self._call("POST", f"/v1/jobs/{self._seg(job_id)}/retry"))

    def run_now(self, job_id: str) -> Job:
        """Makes a scheduled job, or one waiting out a retry's backoff,
        ready now (409 for a job in any other state)."""
        return cast(Job, self._call("POST", f"/v1/jobs/{self._seg(job_id)}/run"))

    def delete(self, job_id: str) -> None:
        """Deletes a job: a finished one, or a waiting one after cancelling
        it (409 for a running job)."""
        self._call("DELETE", f"/v1/jobs/{self._seg(job_id)}")

    def act(self, action: str, ids: Sequence[str]) -> ActionAnswer:
        """Applies a bulk action (``retry``, ``cancel``, ``run`` or
        ``delete``) to the jobs of ``ids`` (at most 1000)."""
        return cast(ActionAnswer, self._call("POST", "/v1/jobs/actions", {"action": action, "ids": list(ids)}))

    def act_on_all(self, action: str, *, batch: int = 500,
                   progress: Optional[Any] = None, **filters: Any) -> ActionAnswer:
        """Applies a bulk action to every job the filters select (``queue``,
        ``state``, ``workflow``, ``key``, ``tag``, ``q``, ``from_``,
        ``to``), ``batch`` jobs a request, following the server's cursor;
        ``progress``, if given, is called with the running totals after each
        batch. Returns the totals."""
        flt: Dict[str, Any] = {}
        for k, v in filters.items():
            if v is None:
                continue
            if k in ("from_", "to"):
                flt["from" if k == "from_" else "to"] = rfc3339(v)
            else:
                flt[k] = v
        total: ActionAnswer = {"matched": 0, "changed": 0, "errors": []}
        after = ""
        while True:
            ans = cast(ActionAnswer, self._call("POST", "/v1/jobs/actions",
                                                {"action": action, "filter": flt, "after": after, "limit": batch}))
            total["matched"] += ans.get("matched", 0)
            total["changed"] += ans.get("changed", 0)
            total["errors"] += ans.get("errors") or []
            if progress is not None:
                progress(total)
            after = ans.get("next", "")
            if not after:
                return total

    # --- workflows -------------------------------------------------------

    def submit_workflow(self, jobs: Sequence[JobSpec], *, name: Optional[str] = None,
                        edges: Optional[Sequence[WorkflowEdge]] = None) -> SubmittedWorkflow:
        """Submits a workflow atomically: jobs named within it (``name``),
        with ``after`` naming other jobs of it, and/or ``edges``
        (``{"from": "a", "to": "b"}``). A dependency cycle raises an
        UsherError whose ``cycle`` lists it."""
        body: Dict[str, Any] = {"jobs": list(jobs)}
        if name is not None:
            body["name"] = name
        if edges:
            body["edges"] = list(edges)
        return cast(SubmittedWorkflow, self._call("POST", "/v1/workflows", body))

    def workflow(self, workflow_id: str, *, wait: Optional[Duration] = None) -> Workflow:
        """Returns a workflow with its jobs. With ``wait`` (at most 60 s)
        the server first waits that long for it to finish."""
        params = None
        timeout = None
        if wait is not None:
            params = {"wait": f"{millis(wait)}ms"}
            timeout = seconds(wait) + _LONG_POLL_SLACK
        return cast(Workflow, self._call("GET", f"/v1/workflows/{self._seg(workflow_id)}",
                                         params=params, timeout=timeout))

    def wait_workflow(self, workflow_id: str, timeout: Optional[Duration] = None) -> Workflow:
        """Returns the workflow once it has finished (``succeeded`` or
        ``failed``), long-polling the server a minute at a time. Raises
        TimeoutError when ``timeout`` runs out first."""
        end = None if timeout is None else time.monotonic() + seconds(timeout)
        while True:
            step = _WORKFLOW_WAIT_STEP
            if end is not None:
                step = min(step, end - time.monotonic())
                if step <= 0:
                    raise TimeoutError(f"workflow {workflow_id} has not finished")
            began = time.monotonic()
            wf = self.workflow(workflow_id, wait=max(step, 0.001))
            if wf.get("state") != "running":
                return wf
            # A server shutting down answers at once: do not spin.
            early = 1.0 - (time.monotonic() - began)
            if early > 0 and (end is None or time.monotonic() + early < end):
                time.sleep(early)

    # --- queues, limits, stats ------------------------------------------

    def create_queue(self, name: str, *, priority: Optional[int] = None,
                     requires: Optional[Sequence[str]] = None, order: Optional[str] = None,
                     batch: Optional[int] = None, active: Optional[bool] = None,
                     retry: Optional[RetryPolicy] = None,
                     strict_start: Optional[bool] = None) -> Queue:
        """Creates a queue (admin; 409 if it exists). Fields left out take
        the server's defaults."""
        body: Dict[str, Any] = {"name": name}
        body.update(self._queue_fields(priority, requires, order, batch, active, retry, strict_start))
        return cast(Queue, self._call("POST", "/v1/queues", body))

    @staticmethod
    def _queue_fields(priority: Optional[int], requires: Optional[Sequence[str]],
                      order: Optional[str], batch: Optional[int], active: Optional[bool],
                      retry: Optional[RetryPolicy], strict_start: Optional[bool]) -> Dict[str, Any]:
        out: Dict[str, Any] = {}
        for k, v in (("priority", priority), ("order", order), ("batch", batch), ("active", active),
                     ("retry", retry), ("strictStart", strict_start)):
            if v is not None:
                out[k] = v
        if requires is not None:
            out["requires"] = list(requires)
        return out

    def update_queue(self, name: str, *, priority: Optional[int] = None,
                     requires: Optional[Sequence[str]] = None, order: Optional[str] = None,
                     batch: Optional[int] = None, active: Optional[bool] = None,
                     retry: Optional[RetryPolicy] = None,
                     strict_start: Optional[bool] = None) -> Queue:
        """Changes the fields given (admin, ``PATCH /v1/queues/{name}``)
        and returns the queue."""
        body = self._queue_fields(priority, requires, order, batch, active, retry, strict_start)
        return cast(Queue, self._call("PATCH", f"/v1/queues/{self._seg(name)}", body))

    def pause_queue(self, name: str) -> Queue:
        """Pauses a queue: its jobs are not handed out until it resumes."""
        return self.update_queue(name, active=False)

    def resume_queue(self, name: str) -> Queue:
        """Resumes a paused queue."""
        return self.update_queue(name, active=True)

    def queue(self, name: str) -> Queue:
        """Returns one queue."""
        return cast(Queue, self._call("GET", f"/v1/queues/{self._seg(name)}"))

    def queues(self) -> List[Queue]:
        """Returns every queue, sorted by name."""
        return cast(List[Queue], self._call("GET", "/v1/queues")["queues"])

    def delete_queue(self, name: str) -> None:
        """Deletes a queue and cancels its queued jobs (admin; 409 while
        jobs of it run)."""
        self._call("DELETE", f"/v1/queues/{self._seg(name)}")

    def flush_queue(self, name: str) -> int:
        """Cancels a queue's queued jobs (admin) and returns how many."""
        return int(self._call("POST", f"/v1/queues/{self._seg(name)}/flush")["cancelled"])

    def set_key_limit(self, pattern: str, limit: int = 0, *, rate: Optional[str] = None,
                      burst: Optional[int] = None) -> KeyLimit:
        """Sets every setting of a key or key pattern (admin): its
        concurrency limit, its rate (``"100/s"``) and burst; limit 0 and no
        rate remove it."""
        body: Dict[str, Any] = {"pattern": pattern, "limit": limit}
        if rate is not None:
            body["rate"] = rate
        if burst is not None:
            body["burst"] = burst
        return cast(KeyLimit, self._call("PUT", "/v1/limits", body))

    def key_limits(self) -> List[KeyLimit]:
        """Returns every key limit, sorted by pattern."""
        return cast(List[KeyLimit], self._call("GET", "/v1/limits")["limits"])

    def stats(self) -> Stats:
        """Returns the server's usage report (``GET /v1/stats``)."""
        return cast(Stats, self._call("GET", "/v1/stats"))

    # --- tokens ----------------------------------------------------------

    def create_token(self, name: str, role: str) -> Token:
        """Creates a token with a role, ``admin``, ``client`` or ``agent``
        (admin); its secret, ``token``, is in this answer only."""
        return cast(Token, self._call("POST", "/v1/tokens", {"name": name, "role": role}))

    def tokens(self) -> List[Token]:
        """Lists the tokens (admin), without their secrets."""
        return cast(List[Token], self._call("GET", "/v1/tokens")["tokens"])

    def delete_token(self, token_id: str) -> None:
        """Deletes a token (admin)."""
        self._call("DELETE", f"/v1/tokens/{self._seg(token_id)}")

    # --- the agent protocol (what Worker speaks) -------------------------

    def lease(self, agent: str, *, slots: int, max_jobs: Optional[int] = None,
              capabilities: Optional[Sequence[str]] = None, queues: Optional[Sequence[str]] = None,
              holding: Optional[Sequence[JobRef]] = None, wait: Optional[Duration] = None) -> LeaseAnswer:
        """Asks for work for an agent (agent role): up to ``max_jobs`` jobs
        (default ``slots``), waiting up to ``wait`` for some. ``holding``,
        when not None, lists every job the agent holds, so that the server
        queues again any job whose answer never reached it."""
        body: Dict[str, Any] = {"agent": agent, "slots": slots}
        if max_jobs is not None:
            body["max"] = max_jobs
        if capabilities:
            body["capabilities"] = list(capabilities)
        if queues:
            body["queues"] = list(queues)
        if holding is not None:
            body["holding"] = list(holding)
        timeout = None
        if wait is not None:
            body["waitMs"] = millis(wait)
            timeout = seconds(wait) + _LONG_POLL_SLACK
        return cast(LeaseAnswer, self._call("POST", "/v1/agent/lease", body, timeout=timeout))

    def renew(self, agent: str, *, timeout: Optional[float] = None) -> RenewAnswer:
        """Renews an agent's lease; returns the jobs to stop and new time
        limits (404 once the lease lapsed)."""
        return cast(RenewAnswer, self._call("POST", "/v1/agent/renew", {"agent": agent}, timeout=timeout))

    def started(self, agent: str, job_id: str, attempt: int) -> bool:
        """Confirms that an agent started an attempt of a strict-start
        queue's job; returns whether the server ignored it."""
        ans = self._call("POST", "/v1/agent/started", {"agent": agent, "id": job_id, "attempt": attempt})
        return bool(ans.get("ignored"))

    def progress(self, agent: str, job_id: str, attempt: int, value: float, message: str = "") -> bool:
        """Reports how far a running attempt got (value from 0 to 1, a
        message of at most 256 bytes); returns whether the server ignored
        it (the attempt no longer runs there)."""
        body: Dict[str, Any] = {"agent": agent, "id": job_id, "attempt": attempt, "value": value}
        if message:
            body["message"] = message
        return bool(self._call("POST", "/v1/agent/progress", body).get("ignored"))

    def complete(self, agent: str, results: Sequence[Result], *, timeout: Optional[float] = None) -> List[Ack]:
        """Reports the results of an agent's jobs in one call; returns one
        acknowledgement per result."""
        ans = self._call("POST", "/v1/agent/complete", {"agent": agent, "results": list(results)},
                         timeout=timeout)
        return cast(List[Ack], ans.get("acks") or [])

    def leave(self, agent: str) -> None:
        """Ends an agent's lease; its running jobs are released as if it
        lapsed."""
        self._call("POST", "/v1/agent/leave", {"agent": agent})
