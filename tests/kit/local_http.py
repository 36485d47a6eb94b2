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


def background_idle(url: str, timeout: float = 30.0) -> dict:
    """The server's background work (``/health``'s ``background``) once nothing of it is queued
    or running, or as it is when ``timeout`` passes: a job's result is stored just before the
    job returns, so a test that read the result may still see the job at work."""
    deadline = time.monotonic() + timeout
    while True:
        work = local_http.get(f"{url}/health").json()["background"]
        if (not work["running"] and not work["queued"]) or time.monotonic() > deadline:
            return work
        time.sleep(0.02)
