"""usher_client: the Python client of usher's generic-jobs API (/v1).

    from usher_client import Client, Worker

    c = Client("http://localhost:8080", token)
    job_id = c.enqueue("scan", "10.1.2.3", delay=60)

    w = Worker(Client(server, agent_token), {"scan": lambda job: scan(job.payload)})
    w.run()

See docs/api.md for the API and docs/agents.md for the worker's protocol.
"""

from .client import Client, job_spec
from .errors import UsherError
from .types import (FINAL_STATES, Ack, Backoff, EnqueueAnswer, Job, JobPage, JobRef, JobSpec,
                    KeyLimit, LeaseAnswer, LeasedJob, Progress, Queue, RenewAnswer, Result,
                    RetryPolicy, State, Stats, SubmittedWorkflow, Token, UniqueOpts, Workflow,
                    WorkflowEdge)
from .worker import CancelJob, EndCause, Handler, JobEnded, RunningJob, Snooze, Worker

__all__ = [
    "Ack", "Backoff", "CancelJob", "Client", "EndCause", "EnqueueAnswer", "FINAL_STATES",
    "Handler", "Job", "JobEnded", "JobPage", "JobRef", "JobSpec", "KeyLimit", "LeaseAnswer",
    "LeasedJob", "Progress", "Queue", "RenewAnswer", "Result", "RetryPolicy", "RunningJob",
    "Snooze", "State", "Stats", "SubmittedWorkflow", "Token", "UniqueOpts", "UsherError",
    "Workflow", "WorkflowEdge", "Worker", "job_spec",
]

__version__ = "0.1.0"
