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

import httpx

local_http = httpx.Client(limits=httpx.Limits(max_connections=None, max_keepalive_connections=0))
