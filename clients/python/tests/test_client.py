"""The client against a real `usher serve`: enqueue, list, bulk,
scheduled and idempotent jobs, workflows, queues and errors."""

from __future__ import annotations

import datetime as dt
import unittest
from typing import List, Optional

import httpx

from server import Running, Server, shared, until
from usher_client import FINAL_STATES, Client, Job, UsherError, Worker, job_spec

server: Optional[Server] = None


def setUpModule() -> None:
    global server
    server = shared()


def admin_token() -> str:
    assert server is not None
    return server.admin_token


class CountingTransport(httpx.HTTPTransport):
    """The real transport, counting the requests it sends."""

    def __init__(self) -> None:
        super().__init__()
        self.requests: List[str] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(f"{request.method} {request.url.path}")
        return super().handle_request(request)


class LoseFirstAnswer(httpx.HTTPTransport):
    """A fake fault: the first POST /v1/jobs reaches the real server, but
    its answer is lost (a ReadError), as on a dropped connection."""

    def __init__(self) -> None:
        super().__init__()
        self.keys: List[str] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        resp = super().handle_request(request)
        if request.url.path == "/v1/jobs" and request.method == "POST":
            self.keys.append(request.headers["Idempotency-Key"])
            if len(self.keys) == 1:
                resp.read()
                resp.close()
                raise httpx.ReadError("answer lost", request=request)
        return resp


class ClientTest(unittest.TestCase):
    c: Client
    user: Client

    @classmethod
    def setUpClass(cls) -> None:
        assert server is not None
        cls.c = Client(server.url, server.admin_token)
        # Jobs are submitted with a client token, as a program would.
        cls.user = Client(server.url, cls.c.create_token("pytest-client", "client")["token"])

    @classmethod
    def tearDownClass(cls) -> None:
        cls.c.close()
        cls.user.close()

    def test_enqueue_get_and_list_pages(self) -> None:
        self.c.create_queue("list")
        ids = [self.user.enqueue("list", {"n": i}, priority=i) for i in range(5)]
        self.assertEqual(ids, sorted(ids, key=int), "ids increase in submission order")
        job = self.user.job(ids[2])
        self.assertEqual((job["id"], job["queue"], job["state"], job["payload"], job["priority"]),
                         (ids[2], "list", "queued", {"n": 2}, 2))

        page = self.user.jobs(queue="list", limit=2)
        self.assertEqual([j["id"] for j in page["jobs"]], ids[:2])
        self.assertEqual(page["next"], ids[1])
        seen = [j["id"] for j in self.user.iter_jobs(queue="list", limit=2)]
        self.assertEqual(seen, ids, "the generator walks every page in id order")
        self.assertEqual([j["id"] for j in self.user.iter_jobs(queue="list", after=ids[2])], ids[3:])

        self.user.cancel(ids[0])
        self.assertEqual([j["id"] for j in self.user.iter_jobs(queue="list", state="cancelled")], ids[:1])
        self.assertEqual(len(list(self.user.iter_jobs(queue="list", state="queued"))), 4)
        retried = self.user.retry(ids[0])
        self.assertEqual(retried["state"], "queued")

    def test_tags_search_and_bulk_actions(self) -> None:
        self.c.create_queue("find")
        ids = [self.user.enqueue("find", i, tags=["nightly", f"n{i}"], metadata={"owner": "py"}) for i in range(5)]
        job = self.user.job(ids[0])
        self.assertEqual((job["tags"], job["metadata"]), (["nightly", "n0"], {"owner": "py"}))
        newest = [j["id"] for j in self.user.iter_jobs(tag="nightly", order="desc", limit=2)]
        self.assertEqual(newest, ids[::-1], "newest first, page after page")
        self.assertEqual([j["id"] for j in self.user.iter_jobs(q="n3")], [ids[3]])
        self.assertEqual([j["id"] for j in self.user.iter_jobs(q="%")], [], "search text is data, not a pattern")

        seen: List[int] = []
        total = self.user.act_on_all("cancel", queue="find", tag="nightly", batch=2,
                                     progress=lambda t: seen.append(t["changed"]))
        self.assertEqual((total["matched"], total["changed"], total["errors"]), (5, 5, []))
        self.assertEqual(seen, [2, 4, 5], "progress after each batch")
        ans = self.user.act("retry", [ids[0], "999999999"])
        self.assertEqual((ans["changed"], [e["id"] for e in ans["errors"]]), (1, ["999999999"]))
        self.user.delete(ids[1])
        with self.assertRaises(UsherError) as e:
            self.user.job(ids[1])
        self.assertEqual(e.exception.status, 404)

    def test_errors_carry_status_text_and_field(self) -> None:
        with self.assertRaises(UsherError) as e:
            self.user.job("999999999")
        self.assertEqual(e.exception.status, 404)

        with self.assertRaises(UsherError) as e:
            self.user.enqueue("no-such-queue", 1)
        self.assertEqual((e.exception.status, e.exception.field), (400, "jobs[0].queue"))
        self.assertIn('unknown queue "no-such-queue"', e.exception.message)

        with self.assertRaises(UsherError) as e:
            self.user.create_queue("not-allowed")
        self.assertEqual(e.exception.status, 403, "a client token may not create queues")
        self.assertIsNone(e.exception.field)

        with self.assertRaises(UsherError) as e, Client(self.c.base_url, "usher_wrong") as wrong:
            wrong.queues()
        self.assertEqual((e.exception.status, e.exception.message), (401, "missing or unknown token"))

        with self.assertRaises(UsherError) as e:
            self.user.jobs(limit=5000)
        self.assertEqual((e.exception.status, e.exception.field), (400, "limit"))

    def test_bulk_is_one_request_all_or_none(self) -> None:
        self.c.create_queue("bulk")
        counting = CountingTransport()
        with Client(self.c.base_url, admin_token(), transport=counting) as c:
            ans = c.enqueue_many([job_spec("bulk", i) for i in range(200)])
        self.assertEqual(counting.requests, ["POST /v1/jobs"])
        self.assertEqual(len(ans["ids"]), 200)
        self.assertNotIn("existing", ans)
        self.assertEqual([j["payload"] for j in self.user.iter_jobs(queue="bulk", limit=1000)], list(range(200)))

        with self.assertRaises(UsherError) as e:
            self.user.enqueue_many([job_spec("bulk", "fine"), job_spec("nowhere", "bad")])
        self.assertEqual((e.exception.status, e.exception.field), (400, "jobs[1].queue"))
        self.assertEqual(len(list(self.user.iter_jobs(queue="bulk", limit=1000))), 200, "nothing was created")

    def test_scheduled(self) -> None:
        self.c.create_queue("later")
        before = dt.datetime.now(dt.timezone.utc)
        delayed = self.user.job(self.user.enqueue("later", "a", delay=3600))
        self.assertEqual(delayed["state"], "scheduled")
        run_at = parse(delayed["runAt"])
        self.assertLess(abs((run_at - before).total_seconds() - 3600), 60)

        when = (before + dt.timedelta(hours=2)).replace(microsecond=0)
        at = self.user.job(self.user.enqueue("later", "b", run_at=when, deadline=when + dt.timedelta(hours=1)))
        self.assertEqual((at["state"], parse(at["runAt"]), parse(at["deadline"])),
                         ("scheduled", when, when + dt.timedelta(hours=1)))

        now = self.user.run_now(at["id"])
        self.assertEqual(now["state"], "queued")
        with self.assertRaises(UsherError) as e:
            self.user.run_now(at["id"])
        self.assertEqual(e.exception.status, 409)

        with self.assertRaises(ValueError):
            job_spec("later", run_at=dt.datetime(2030, 1, 1))  # naive: its zone is unknown
        with self.assertRaises(ValueError):
            job_spec("later", run_at=when, delay=5)

    def test_scheduled_job_runs_when_due(self) -> None:
        self.c.create_queue("soon")
        job_id = self.user.enqueue("soon", "x", delay=0.3)
        agent = Client(self.c.base_url, self.c.create_token("pytest-soon", "agent")["token"])
        self.addCleanup(agent.close)
        w = Worker(agent, {"soon": lambda job: "ran"}, agent="pytest-soon", wait=1)
        with Running(w):
            job = until(lambda: finished(self.user, job_id), 10, "the scheduled job to run")
        self.assertEqual((job["state"], job["result"]), ("succeeded", "ran"))
        self.assertGreaterEqual((parse(job["startedAt"]) - parse(job["createdAt"])).total_seconds(), 0.3)

    def test_idempotent_enqueue(self) -> None:
        self.c.create_queue("once")
        first = self.user.enqueue("once", {"order": 17}, idempotency_key="order-17")
        again = self.user.enqueue_many([job_spec("once", {"order": 17}, idempotency_key="order-17")])
        self.assertEqual(again, {"ids": [first], "existing": [True]})

        jobs = [job_spec("once", i) for i in range(3)]
        ans = self.user.enqueue_many(jobs, request_key="pytest-request-1")
        repeat = self.user.enqueue_many(jobs, request_key="pytest-request-1")
        self.assertEqual(repeat, {"ids": ans["ids"], "existing": [True, True, True]})
        with self.assertRaises(UsherError) as e:
            self.user.enqueue_many(jobs[:2], request_key="pytest-request-1")
        self.assertEqual((e.exception.status, e.exception.field), (409, "Idempotency-Key"))
        self.assertEqual(len(list(self.user.iter_jobs(queue="once"))), 4)

    def test_enqueue_tries_again_with_the_same_key_after_a_lost_answer(self) -> None:
        self.c.create_queue("lost")
        lose = LoseFirstAnswer()
        with Client(self.c.base_url, admin_token(), transport=lose) as c:
            ans = c.enqueue_many([job_spec("lost", 1), job_spec("lost", 2)])
        self.assertEqual(len(lose.keys), 2)
        self.assertEqual(lose.keys[0], lose.keys[1], "the second try carries the first's key")
        self.assertEqual(ans["existing"], [True, True], "the server answered the first request's jobs")
        self.assertEqual([j["id"] for j in self.user.iter_jobs(queue="lost")], ans["ids"])

    def test_queues_create_list_pause(self) -> None:
        q = self.c.create_queue("paused", priority=3, retry={"maxAttempts": 2})
        self.assertEqual((q["name"], q["priority"], q["active"], q["retry"]["maxAttempts"]),
                         ("paused", 3, True, 2))
        self.assertIn("paused", [x["name"] for x in self.user.queues()])
        with self.assertRaises(UsherError) as e:
            self.c.create_queue("paused")
        self.assertEqual(e.exception.status, 409)

        self.assertFalse(self.c.pause_queue("paused")["active"])
        job_id = self.user.enqueue("paused", "x")
        lease = self.c.lease("pytest-pause", slots=1, queues=["paused"], wait=0)
        self.assertEqual(lease["jobs"], [], "a paused queue hands out nothing")
        self.assertTrue(self.c.resume_queue("paused")["active"])
        lease = self.c.lease("pytest-pause", slots=1, queues=["paused"], wait=0)
        self.assertEqual([j["id"] for j in lease["jobs"]], [job_id])
        acks = self.c.complete("pytest-pause", [{"id": job_id, "attempt": 1, "exitCode": 0}])
        self.assertEqual(acks[0]["ignored"], False)
        self.c.leave("pytest-pause")
        self.assertEqual(self.user.job(job_id)["state"], "succeeded")

    def test_workflow(self) -> None:
        self.c.create_queue("etl")
        wf = self.user.submit_workflow([
            job_spec("etl", "a", name="a"),
            job_spec("etl", "b", name="b", after=["a"]),
            job_spec("etl", "c", name="c", after=["a"]),
            job_spec("etl", "d", name="d"),
        ], name="nightly", edges=[{"from": "b", "to": "d"}, {"from": "c", "to": "d"}])
        self.assertEqual(sorted(wf["jobs"]), ["a", "b", "c", "d"])
        self.assertEqual(self.user.workflow(wf["id"], wait=0.05)["state"], "running")
        self.assertEqual(self.user.job(wf["jobs"]["d"])["state"], "waiting")

        agent = Client(self.c.base_url, self.c.create_token("pytest-etl", "agent")["token"])
        self.addCleanup(agent.close)
        w = Worker(agent, {"etl": lambda job: job.payload.upper()}, agent="pytest-etl", concurrency=2, wait=1)
        with Running(w):
            done = self.user.wait_workflow(wf["id"], timeout=10)
        self.assertEqual((done["name"], done["state"]), ("nightly", "succeeded"))
        jobs = {j["payload"]: j for j in done["jobs"]}
        self.assertEqual({k: (j["state"], j["result"]) for k, j in jobs.items()},
                         {k: ("succeeded", k.upper()) for k in "abcd"})
        for before, after in (("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")):
            self.assertLessEqual(parse(jobs[before]["finishedAt"]), parse(jobs[after]["startedAt"]))
        self.assertEqual(len(list(self.user.iter_jobs(workflow=wf["id"]))), 4)

        with self.assertRaises(UsherError) as e:
            self.user.submit_workflow([job_spec("etl", name="x", after=["y"]),
                                       job_spec("etl", name="y", after=["x"])])
        self.assertEqual(e.exception.status, 400)
        self.assertEqual(sorted(e.exception.cycle or []), ["x", "y"])


def finished(c: Client, job_id: str) -> Optional[Job]:
    job = c.job(job_id)
    return job if job["state"] in FINAL_STATES else None


def parse(s: str) -> dt.datetime:
    """An RFC 3339 time of the server (nanoseconds cut to microseconds)."""
    s = s.replace("Z", "+00:00")
    if "." in s:
        head, rest = s.split(".", 1)
        i = next(k for k, ch in enumerate(rest) if not ch.isdigit())
        s = head + "." + rest[:i][:6].ljust(6, "0") + rest[i:]
    return dt.datetime.fromisoformat(s)


if __name__ == "__main__":
    unittest.main()
