"""A worker whose handler never returns: the test kills its process with
SIGKILL mid-job. Arguments: server URL, agent token, agent name, queue."""

import sys
import threading

from usher_client import Client, RunningJob, Worker


def main() -> None:
    url, token, agent, queue = sys.argv[1:5]

    def hang(job: RunningJob) -> None:
        print(f"started {job.id} {job.attempt}", flush=True)
        threading.Event().wait()

    Worker(Client(url, token), {queue: hang}, agent=agent, wait=1).run()


if __name__ == "__main__":
    main()
