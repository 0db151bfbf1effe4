"""A real `usher serve` for the tests: bin/usher on a free loopback port
with a fresh SQLite file, an admin token given on its command line, and a
short agent lease so that a lapsed lease is seen in about a second."""

from __future__ import annotations

import atexit
import os
import re
import secrets
import shutil
import subprocess
import tempfile
import threading
import time
from typing import TYPE_CHECKING, Callable, List, Optional, TypeVar

import httpx

if TYPE_CHECKING:
    from usher_client import Worker

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
BIN = os.environ.get("USHER_BIN") or os.path.join(REPO, "bin", "usher")

#: The agent lease of the test server: short, so that a killed worker's
#: jobs come back quickly (a worker renews every third of it).
LEASE = "1s"

_SERVING = re.compile(r'msg="usher serving" addr=(\S+)')

T = TypeVar("T")


class Server:
    """A running `usher serve`; stop() ends it and removes its files."""

    def __init__(self) -> None:
        if not os.access(BIN, os.X_OK):
            raise RuntimeError(f"{BIN} is missing: build it with `go build -o bin/usher ./cmd/usher` "
                               "(make pyclient does)")
        self.dir = tempfile.mkdtemp(prefix="usher-pyclient-")
        self.admin_token = "usher_pytest-" + secrets.token_hex(12)
        self.log: List[str] = []
        self.proc = subprocess.Popen(
            [BIN, "serve", "--listen", "127.0.0.1:0", "--data", os.path.join(self.dir, "usher.db"),
             "--backends", "0", "--admin-token", self.admin_token, "--agent-lease", LEASE,
             "--shutdown-grace", "5s", "--log-level", "info"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        addr: List[str] = []
        ready = threading.Event()

        def drain() -> None:
            assert self.proc.stdout is not None
            for line in self.proc.stdout:
                self.log.append(line)
                m = _SERVING.search(line)
                if m and not addr:
                    addr.append(m.group(1))
                    ready.set()
            ready.set()

        self._drain = threading.Thread(target=drain, daemon=True)
        self._drain.start()
        if not ready.wait(30) or not addr:
            self.stop()
            raise RuntimeError("usher serve did not start:\n" + "".join(self.log))
        self.url = "http://" + addr[0]
        until(lambda: httpx.get(self.url + "/livez").status_code == 200, 30, "usher serve's /livez")

    def stop(self) -> None:
        """Ends the server (SIGTERM, then SIGKILL) and removes its files."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._drain.join(5)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        shutil.rmtree(self.dir, ignore_errors=True)


_shared: Optional[Server] = None


def shared() -> Server:
    """The server every test module uses, started on first use and
    stopped when the test process exits (one start for the suite)."""
    global _shared
    if _shared is None:
        _shared = Server()
        atexit.register(_shared.stop)
    return _shared


def until(cond: Callable[[], Optional[T]], timeout: float, what: str) -> T:
    """Polls cond until it returns something truthy, and returns that; fails
    naming what after timeout seconds. Exceptions count as not yet."""
    deadline = time.monotonic() + timeout
    last: Optional[BaseException] = None
    while True:
        try:
            got = cond()
            if got:
                return got
        except Exception as e:  # e.g. the server not listening yet
            last = e
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}"
                                 + (f" (last error: {last})" if last else ""))
        time.sleep(0.01)


class Running:
    """Runs a worker in a thread for a with block; leaving the block stops
    it gracefully, waits for run() to return and re-raises its error."""

    def __init__(self, worker: "Worker") -> None:
        self.worker = worker
        self.error: Optional[BaseException] = None
        self.thread = threading.Thread(target=self._run, name=f"run-{worker.agent}", daemon=True)

    def _run(self) -> None:
        try:
            self.worker.run()
        except BaseException as e:
            self.error = e

    def __enter__(self) -> "Running":
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self, timeout: float = 15.0) -> None:
        """Stops the worker and waits for run() to return."""
        self.worker.stop()
        self.thread.join(timeout)
        if self.thread.is_alive():
            raise AssertionError(f"worker {self.worker.agent} did not stop within {timeout}s")
        if self.error is not None:
            raise self.error
