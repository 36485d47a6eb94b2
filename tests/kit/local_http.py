"""One HTTP client for the tests' calls to the servers they start.

``httpx.get`` and its siblings build a client per call, and every client loads the CA bundle
into a new SSL context: about 15 ms of CPU, for a plain-HTTP call to 127.0.0.1. Polling a
starting server every 50 ms paid that on each poll, and the suite paid it thousands of times.
This client is built once per process. It keeps no connection alive between calls, so every
call opens a fresh connection as ``httpx.get`` would (a restarted server never meets a stale
pooled one, and a call never lands on a worker an earlier call picked); it sets no limit on
connections open at once (threads of one test may stream many), and it is safe to share
between threads.
"""

from __future__ import annotations

import time

import httpx

local_http = httpx.Client(limits=httpx.Limits(max_connections=None, max_keepalive_connections=0))


def background_idle(url: str, *, timeout: float = 30.0, quiet_polls: int = 1, done_at_least: int = 0) -> dict:
    """The server's background work (``/health``'s ``background``) once nothing of it is queued
    or running at ``quiet_polls`` reads in a row (with several workers each read reaches one
    of them) and at least ``done_at_least`` jobs ended; AssertionError past ``timeout``. A
    job's result is stored just before the job returns, so a test that read the result may
    still see the job at work."""
    deadline, quiet = time.monotonic() + timeout, 0
    while True:
        work = local_http.get(f"{url}/health", timeout=5).json()["background"]
        settled = not work["queued"] and not work["running"] and work["done"] + work["failed"] >= done_at_least
        quiet = quiet + 1 if settled else 0
        if quiet >= quiet_polls:
            return work
        assert time.monotonic() < deadline, f"background work never settled: {work}"
        time.sleep(0.05)
