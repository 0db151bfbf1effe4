"""The worker against a real `usher serve`: handlers of two queues,
results, progress, retries, snoozes, cancels, time limits, stops by the
server, graceful stop, a lost lease answer, and a worker killed mid-job."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import unittest
from typing import Any, Dict, List, Optional

from server import Running, Server, shared, until
from usher_client import CancelJob, Client, EndCause, Job, RetryPolicy, RunningJob, Snooze, Worker

server: Optional[Server] = None
HERE = os.path.dirname(os.path.abspath(__file__))


def setUpModule() -> None:
    global server
    server = shared()


FAST_RETRY: RetryPolicy = {"maxAttempts": 2, "backoff": {"policy": "constant", "baseMs": 10}}


class Boom(Exception):
    """A handler's failure with an exit code of its own."""

    exit_code = 3


class WorkerTest(unittest.TestCase):
    admin: Client
    agent_token: str

    @classmethod
    def setUpClass(cls) -> None:
        assert server is not None
        cls.admin = Client(server.url, server.admin_token)
        cls.agent_token = cls.admin.create_token("pytest-agent", "agent")["token"]

    @classmethod
    def tearDownClass(cls) -> None:
        cls.admin.close()

    def worker(self, handlers: Dict[str, Any], agent: str, **kw: Any) -> Worker:
        assert server is not None
        kw.setdefault("wait", 1)
        client = Client(server.url, self.agent_token)
        self.addCleanup(client.close)
        return Worker(client, handlers, agent=agent, **kw)

    def finished(self, job_id: str, what: str = "the job to finish", timeout: float = 10) -> Job:
        def done() -> Optional[Job]:
            job = self.admin.job(job_id)
            return job if job["state"] in ("succeeded", "failed", "cancelled") else None
        return until(done, timeout, f"{what} ({job_id})")

    def agents(self) -> List[str]:
        return [a["id"] for a in self.admin.stats().get("agents") or []]

    def test_two_queues_results_progress_and_a_retried_failure(self) -> None:
        self.admin.create_queue("double")
        self.admin.create_queue("flaky", retry=FAST_RETRY)
        progress_seen = threading.Event()

        def double(job: RunningJob) -> Any:
            if job.payload == "progress":
                self.assertFalse(job.progress(0.5, "half way"))
                progress_seen.wait(10)
                return "reported"
            return {"double": job.payload * 2}

        def flaky(job: RunningJob) -> Any:
            if job.attempt == 1:
                raise RuntimeError("flaky on its first attempt")
            return {"attempt": job.attempt}

        with Running(self.worker({"double": double, "flaky": flaky}, "pytest-two", concurrency=4)) as r:
            slow = self.admin.enqueue("double", "progress")
            doubles = [self.admin.enqueue("double", n) for n in range(3)]
            flakies = [self.admin.enqueue("flaky", n) for n in range(3)]
            progress = until(lambda: self.admin.job(slow).get("progress"), 10, "the progress report")
            self.assertEqual(progress, {"value": 0.5, "message": "half way"})
            self.assertEqual(self.admin.job(slow)["state"], "running")
            progress_seen.set()
            for n, job_id in enumerate(doubles):
                job = self.finished(job_id)
                self.assertEqual((job["state"], job["result"], job["attempt"], job["agent"]),
                                 ("succeeded", {"double": 2 * n}, 1, "pytest-two"))
            for job_id in flakies:
                job = self.finished(job_id)
                self.assertEqual((job["state"], job["result"], job["attempt"]),
                                 ("succeeded", {"attempt": 2}, 2))
            self.assertEqual(self.finished(slow)["result"], "reported")
            self.assertIn("pytest-two", self.agents())
            r.stop()
        self.assertNotIn("pytest-two", self.agents(), "a stopped worker leaves")

    def test_what_a_handler_can_say(self) -> None:
        self.admin.create_queue("say", retry={"maxAttempts": 3, "backoff": {"policy": "constant", "baseMs": 10}})
        calls: Dict[str, int] = {}
        lock = threading.Lock()

        def say(job: RunningJob) -> Any:
            with lock:
                calls[job.id] = calls.get(job.id, 0) + 1
                n = calls[job.id]
            if job.payload == "snooze":
                if n == 1:
                    raise Snooze(0.05)
                return f"woke on call {n}, attempt {job.attempt}"
            if job.payload == "cancel":
                job.set_result({"partial": 1})
                raise CancelJob("the payload names no host")
            if job.payload == "boom":
                job.write("about to fail\n")
                raise Boom("went wrong")
            return None

        with Running(self.worker({"say": say}, "pytest-say", concurrency=3)):
            snooze = self.admin.enqueue("say", "snooze")
            cancel = self.admin.enqueue("say", "cancel")
            boom = self.admin.enqueue("say", "boom")
            quiet = self.admin.enqueue("say", "quiet")
            jobs = {k: self.finished(v) for k, v in
                    (("snooze", snooze), ("cancel", cancel), ("boom", boom), ("quiet", quiet))}

        self.assertEqual((jobs["snooze"]["state"], jobs["snooze"]["result"]),
                         ("succeeded", "woke on call 2, attempt 1"), "a snooze does not count as an attempt")
        self.assertEqual((jobs["cancel"]["state"], jobs["cancel"]["attempt"], jobs["cancel"]["error"],
                          jobs["cancel"]["result"]),
                         ("failed", 1, "the payload names no host", {"partial": 1}), "no retry after a cancel")
        self.assertEqual((jobs["boom"]["state"], jobs["boom"]["attempt"], jobs["boom"]["exitCode"],
                          jobs["boom"]["error"]), ("failed", 3, 3, "Boom: went wrong"))
        self.assertIn("about to fail", jobs["boom"]["output"])
        self.assertIn("Traceback", jobs["boom"]["output"])
        self.assertEqual(jobs["quiet"]["state"], "succeeded")
        self.assertNotIn("result", jobs["quiet"])

    def test_time_limit_and_a_stop_by_the_server(self) -> None:
        self.admin.create_queue("limits")
        started = threading.Event()
        causes: Dict[str, Optional[EndCause]] = {}

        def limited(job: RunningJob) -> Any:
            if job.payload == "cancel me":
                started.set()
            job.wait(20)
            causes[job.payload] = job.cause
            job.check()
            return "never"

        with Running(self.worker({"limits": limited}, "pytest-limits", concurrency=2, grace=1)):
            timed = self.admin.enqueue("limits", "time out", timeout=0.3)
            stopped = self.admin.enqueue("limits", "cancel me")
            self.assertTrue(started.wait(10))
            self.assertEqual(self.admin.cancel(stopped)["state"], "cancelled")
            job = self.finished(timed)
            self.assertEqual((job["state"], job["error"]), ("failed", "job ran past its time limit (0.3s)"))
            until(lambda: "cancel me" in causes, 10, "the handler to see the server's stop")
        self.assertEqual(causes, {"time out": EndCause.TIMEOUT, "cancel me": EndCause.STOPPED})
        self.assertEqual(self.admin.job(stopped)["state"], "cancelled")

    def test_strict_start_confirmations_let_the_next_job_out(self) -> None:
        self.admin.create_queue("in-order", order="strict", strict_start=True)
        entered: List[str] = []
        release = threading.Event()

        def hold(job: RunningJob) -> Any:
            entered.append(job.payload)
            release.wait(10)
            return job.payload

        with Running(self.worker({"in-order": hold}, "pytest-strict", concurrency=2)):
            ids = [self.admin.enqueue("in-order", p) for p in ("first", "second")]
            # The second job goes out only once the first one's start was
            # confirmed; both then run at once.
            until(lambda: entered == ["first", "second"], 10, "both jobs of the strict-start queue to run")
            release.set()
            self.assertEqual([self.finished(i)["result"] for i in ids], ["first", "second"])

    def test_abort_ends_the_running_jobs(self) -> None:
        self.admin.create_queue("aborted")
        started = threading.Event()

        def until_ended(job: RunningJob) -> Any:
            started.set()
            job.wait(20)
            job.check()

        r = Running(self.worker({"aborted": until_ended}, "pytest-abort"))
        with r:
            job_id = self.admin.enqueue("aborted", None)
            self.assertTrue(started.wait(10))
            r.worker.abort()
            r.thread.join(10)
            self.assertFalse(r.thread.is_alive())
        job = self.admin.job(job_id)
        self.assertEqual((job["state"], job["error"]), ("failed", "worker aborted"))
        self.assertNotIn("pytest-abort", self.agents())

    def test_graceful_stop_finishes_running_jobs_then_leaves(self) -> None:
        self.admin.create_queue("graceful")
        started, release = threading.Event(), threading.Event()

        def longer_than_the_lease(job: RunningJob) -> Any:
            started.set()
            release.wait(10)
            # Works on for one and a half leases (1 s) after the stop: only
            # renewals keep the job with this agent.
            if job.wait(1.5):
                raise AssertionError(f"the job's time ended: {job.cause}")
            return "finished"

        r = Running(self.worker({"graceful": longer_than_the_lease}, "pytest-graceful"))
        with r:
            job_id = self.admin.enqueue("graceful", None)
            self.assertTrue(started.wait(10))
            r.worker.stop()
            self.assertTrue(r.thread.is_alive(), "run() waits for the running job")
            release.set()
            r.thread.join(10)
            self.assertFalse(r.thread.is_alive())
        job = self.admin.job(job_id)
        self.assertEqual((job["state"], job["attempt"], job.get("result"), job.get("error")),
                         ("succeeded", 1, "finished", None))
        self.assertNotIn("pytest-graceful", self.agents())

    def test_a_lease_answer_lost_on_the_way_is_handed_back(self) -> None:
        self.admin.create_queue("lost-answer")
        job_id = self.admin.enqueue("lost-answer", "x")
        # The agent asked, and the server handed the job out, but the
        # answer never reached the worker (the worker below is that agent
        # after a restart).
        agent = Client(self.admin.base_url, self.agent_token)
        self.addCleanup(agent.close)
        got = agent.lease("pytest-lost", slots=1, queues=["lost-answer"], wait=0)
        self.assertEqual([j["id"] for j in got["jobs"]], [job_id])
        self.assertEqual(self.admin.job(job_id)["state"], "running")
        with Running(self.worker({"lost-answer": lambda job: job.attempt}, "pytest-lost")):
            job = self.finished(job_id, "the job the worker does not hold to be handed back")
        self.assertEqual((job["state"], job["result"]), ("succeeded", 1),
                         "the lost attempt was not counted")

    def test_a_killed_workers_job_runs_on_another_worker(self) -> None:
        assert server is not None
        self.admin.create_queue("crash", retry=FAST_RETRY)
        job_id = self.admin.enqueue("crash", {"work": 1})
        env = dict(os.environ, PYTHONPATH=os.path.dirname(HERE))
        proc = subprocess.Popen([sys.executable, os.path.join(HERE, "crash_worker.py"), server.url,
                                 self.agent_token, "pytest-crash-1", "crash"],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        lines: List[str] = []

        def read() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                lines.append(line)

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        try:
            until(lambda: f"started {job_id} 1\n" in lines, 15, "the first worker to start the job")
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            reader.join(5)
            assert proc.stdout is not None
            proc.stdout.close()
        job = self.admin.job(job_id)
        self.assertEqual((job["state"], job["agent"]), ("running", "pytest-crash-1"))

        killed_at = time.monotonic()
        with Running(self.worker({"crash": lambda job: {"by": "second", "attempt": job.attempt}},
                                 "pytest-crash-2")):
            job = self.finished(job_id, "the second worker to run the job after the lease lapsed")
        self.assertEqual((job["state"], job["agent"], job["attempt"], job["result"]),
                         ("succeeded", "pytest-crash-2", 2, {"by": "second", "attempt": 2}))
        self.assertLess(time.monotonic() - killed_at, 10)
        self.assertGreaterEqual(self.admin.stats()["counters"]["leaseExpiries"], 1)


if __name__ == "__main__":
    unittest.main()
