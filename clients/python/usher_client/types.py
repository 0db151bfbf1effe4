"""The JSON shapes of /v1 (docs/api.md), as typed dictionaries.

Requests and answers stay plain dictionaries with the server's camelCase
names, so that a field the server adds later is kept, not dropped; these
TypedDicts give them types. Every field but the first few of a shape is
optional (``total=False``): the server leaves empty fields out.
"""

from __future__ import annotations

from typing import Any, Dict, List, Literal, TypedDict

#: Where a job is. ``waiting`` (for its dependencies), ``scheduled`` (for
#: its first run's due time), ``delayed`` (waiting to retry, or snoozed),
#: ``queued``, ``running``; final: ``succeeded``, ``failed``, ``cancelled``.
State = Literal["waiting", "scheduled", "delayed", "queued", "running", "succeeded", "failed", "cancelled"]

#: The states a job never leaves by itself.
FINAL_STATES = frozenset({"succeeded", "failed", "cancelled"})


class Backoff(TypedDict, total=False):
    """The wait before a job's next try: ``policy`` is ``exponential``
    (the default), ``linear`` or ``constant``."""

    policy: str
    baseMs: int
    maxMs: int


class RetryPolicy(TypedDict, total=False):
    """How often a job is tried (``maxAttempts``) and how long it waits
    between tries."""

    maxAttempts: int
    backoffMs: int
    maxBackoffMs: int
    backoff: Backoff


class UniqueOpts(TypedDict, total=False):
    """Which jobs count as the same unique job (docs/api.md, "Idempotent
    enqueue and unique jobs")."""

    byArgs: bool
    byPeriodMs: int
    states: List[str]


class _JobSpecBase(TypedDict):
    queue: str


class JobSpec(_JobSpecBase, total=False):
    """A job to submit (one element of ``POST /v1/jobs``'s ``jobs``);
    :func:`usher_client.job_spec` builds one from keyword arguments."""

    payload: Any
    tier: str
    timeoutMs: int
    priority: int
    keys: List[str]
    group: str
    mode: str
    after: List[str]
    runAfterFailure: bool
    retry: RetryPolicy
    backoff: Backoff
    runAt: str
    delayMs: int
    deadline: str
    idempotencyKey: str
    unique: UniqueOpts
    tags: List[str]
    metadata: Dict[str, Any]
    traceparent: str
    # Only within a workflow: the job's name there.
    name: str


class Progress(TypedDict, total=False):
    """How far a running job got, as its handler last reported it."""

    value: float
    message: str


class Job(JobSpec, total=False):
    """A job as the server returns it: its spec and its progress."""

    id: str
    workflow: str
    state: State
    attempt: int
    maxAttempts: int
    agent: str
    createdAt: str
    startedAt: str
    finishedAt: str
    exitCode: int
    output: str
    error: str
    progress: Progress
    result: Any
    attempts: List["Attempt"]


class Attempt(TypedDict, total=False):
    """An earlier attempt of a job that ended without success (in
    ``Client.job``'s answer only)."""

    attempt: int
    agent: str
    startedAt: str
    endedAt: str
    exitCode: int
    error: str
    output: str


class ActionAnswer(TypedDict, total=False):
    """What a bulk action did: the jobs it met and changed, why the others
    were not (``errors``: ``{"id", "error"}``), and the cursor of the next
    batch (absent once a filter is covered)."""

    matched: int
    changed: int
    errors: List[Dict[str, str]]
    next: str


class JobPage(TypedDict, total=False):
    """One page of ``GET /v1/jobs``; ``next`` is absent on the last page."""

    jobs: List[Job]
    next: str


class EnqueueAnswer(TypedDict, total=False):
    """The ids of submitted jobs in the given order; ``existing`` (absent
    when all false) marks those that were there before."""

    ids: List[str]
    existing: List[bool]


#: A dependency of a workflow: job ``to`` (a name) runs after job ``from``
#: succeeded. (``from`` is a Python keyword, hence the functional form.)
WorkflowEdge = TypedDict("WorkflowEdge", {"from": str, "to": str})


class SubmittedWorkflow(TypedDict):
    """A submitted workflow's id and the id of each job by name."""

    id: str
    jobs: Dict[str, str]


class Workflow(TypedDict, total=False):
    """A workflow as the server returns it; ``state`` is ``running`` until
    every job finished, then ``succeeded`` if all did, else ``failed``."""

    id: str
    name: str
    state: str
    jobs: List[Job]


class Queue(TypedDict, total=False):
    """A queue's configuration as the server returns it."""

    name: str
    priority: int
    requires: List[str]
    order: str
    batch: int
    active: bool
    retry: RetryPolicy
    strictStart: bool


class KeyLimit(TypedDict, total=False):
    """The limits of a key or key pattern."""

    pattern: str
    limit: int
    rate: str
    burst: int


class Token(TypedDict, total=False):
    """An API token; ``token``, its secret, is only in the answer that
    created it."""

    id: str
    name: str
    role: str
    createdAt: str
    token: str


class JobRef(TypedDict):
    """One attempt of a job."""

    id: str
    attempt: int


class LeasedJob(TypedDict, total=False):
    """A job handed to an agent by ``POST /v1/agent/lease``."""

    id: str
    queue: str
    attempt: int
    payload: Any
    timeoutMs: int
    confirmStart: bool


class LeaseAnswer(TypedDict, total=False):
    """The work handed to an agent and how long its lease lasts."""

    jobs: List[LeasedJob]
    leaseMs: int


class JobTimeout(TypedDict):
    """A new, shorter time limit of a running job, from its start."""

    id: str
    attempt: int
    timeoutMs: int


class RenewAnswer(TypedDict, total=False):
    """The answer to a lease renewal: the jobs to stop now and the new time
    limits of others."""

    leaseMs: int
    stop: List[JobRef]
    timeouts: List[JobTimeout]


class Result(TypedDict, total=False):
    """The outcome of one attempt, as an agent reports it."""

    id: str
    attempt: int
    exitCode: int
    output: str
    error: str
    snoozeMs: int
    cancel: bool
    result: Any


class Ack(TypedDict, total=False):
    """The acknowledgement of one result."""

    id: str
    ignored: bool
    retrying: bool
    snoozed: bool


Stats = Dict[str, Any]
