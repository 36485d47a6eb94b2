"""N gateway processes serving one listening socket (``DEV_SERVER_WORKERS``), under uvicorn's own supervisor.

``supervise(role, settings, sock, count)`` is the parent. The caller has bound the socket once
(so "port in use" is one line) and checked the stores and the app once (so a bad database or
a bad configuration is one line, and the migrations run once); then uvicorn's
``Multiprocess`` supervisor starts ``count`` workers, each a fresh process running uvicorn's
``Server`` on the shared socket; the kernel hands each new connection to whichever worker
accepts first, and a connection stays with it.

- A worker that dies, or stops answering the supervisor's ping for
  ``timeout_worker_healthcheck`` seconds, is replaced by a fresh one (``Child process [pid]
  died`` in the log); the others go on serving meanwhile. A worker that fails before it
  serves (its app cannot be built, its lifespan fails) exits with uvicorn's
  ``STARTUP_FAILURE`` code, which stops the supervisor instead of restarting it forever.
- SIGINT or SIGTERM to the supervisor: every worker gets SIGTERM (after a terminal's Ctrl-C
  each worker already got one SIGINT; uvicorn takes a second SIGINT, not a SIGTERM, as
  "force exit"); the supervisor waits ``STOP_TIMEOUT_S`` for them, then kills the rest, and
  exits 0. SIGHUP replaces the workers one by one; SIGTTIN and SIGTTOU add or remove one.
- A worker whose supervisor is gone (SIGKILLed) stops itself (``_stop_when_orphaned``), so
  no orphan keeps the port.

What each worker sets up for itself, in ``WorkerApp`` (the app factory uvicorn calls in the
worker; workers are spawned, not forked, so nothing of the parent's heap comes along): its
log handler (lines prefixed ``gateway:<pid>``), its app (``create_app`` with the
``WorkerSlot`` that ``/health`` reports and ``freeze_heap``: the warm-up moves what start-up
built out of the garbage collector's sight, as a single process does), and through the
app's lifespan its stores, its telemetry (its own span and log export queue to the studio)
and its model warm-up. uvicorn runs it on uvloop where uvloop is installed.

Why uvicorn's supervisor rather than our own fork loop (which never restarted a worker):
it restarts dead and hung workers, runs where ``fork`` does not, and is maintained with the
server. Spawning costs each worker its imports (about 0.9 s of CPU where a forked worker
spent 0.1 s, and 8 MB more memory; docs/architecture.md#decisions), which did not justify
keeping our own.

Everything workers share is in the database (turn leases, messages, working memory,
titles); the studio stays one process because it alone opens the DuckDB file.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any

import uvicorn
from uvicorn.config import STARTUP_FAILURE
from uvicorn.supervisors import Multiprocess

from dev_server.api.worker_slot import WorkerSlot
from dev_server.connection_limits import http_protocol
from dev_server.settings import Settings

log = logging.getLogger(__name__)

STOP_TIMEOUT_S = 10.0
HEALTHCHECK_S = 30  # a worker that does not answer the supervisor's ping this long is replaced: long enough
# for a spawned worker to import the app on a loaded machine before its ping thread runs


def server_config(app: Any, settings: Settings, **options: Any) -> uvicorn.Config:
    """uvicorn's configuration of one serving process (a single one, or each worker): the
    guarded protocol (read deadlines and the connection cap, ``dev_server.connection_limits``),
    keep-alive, and no uvicorn access log (``dev_server.api.access_log`` writes ours)."""
    return uvicorn.Config(app, log_config=None, log_level=settings.log_level, access_log=False,
                          http=http_protocol(settings), forwarded_allow_ips=settings.forwarded_allow_ips,
                          timeout_graceful_shutdown=3, timeout_keep_alive=settings.keep_alive_s,
                          headers=[("Keep-Alive", f"timeout={settings.keep_alive_s}")], **options)


def configure_logging(name: str, level: str) -> None:
    """One handler on the root logger: every line of this process prefixed with ``name``."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(f"{name:<7} | %(levelname)-7s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())


@dataclass(frozen=True)
class WorkerApp:
    """The app factory uvicorn calls in each worker (picklable: it is sent to the spawned
    process with uvicorn's configuration)."""

    role: str
    settings: Settings
    count: int
    supervisor_pid: int

    def __call__(self) -> Any:
        configure_logging(f"{self.role}:{os.getpid()}", self.settings.log_level)
        threading.Thread(target=_stop_when_orphaned, args=(self.supervisor_pid,), name="orphan-watch",
                         daemon=True).start()
        try:
            from dev_server.factory import create_app

            return create_app(self.role, self.settings, worker=WorkerSlot(self.count, self.supervisor_pid),
                              freeze_heap=True)
        except Exception as exc:  # the parent built the same app before spawning: not expected
            log.error("the app could not be built: %s: %s", type(exc).__name__, exc)
            sys.exit(STARTUP_FAILURE)


class _Supervisor(Multiprocess):
    """uvicorn's supervisor, with a deadline on stopping: a worker still running
    ``STOP_TIMEOUT_S`` after its SIGTERM is killed (uvicorn would wait for it forever)."""

    def join_all(self) -> None:
        deadline = time.monotonic() + STOP_TIMEOUT_S
        for worker in self.processes:
            worker.process.join(max(0.0, deadline - time.monotonic()))
            if worker.process.is_alive():
                log.warning("worker %s did not stop within %.0f s: killed", worker.pid, STOP_TIMEOUT_S)
                worker.kill()
                worker.process.join()


def supervise(role: str, settings: Settings, sock: socket.socket, count: int) -> int:
    """Run ``count`` workers of ``role`` on ``sock`` until SIGINT or SIGTERM; the exit code
    (1 when a worker failed to start, which stops them all)."""
    app = WorkerApp(role, settings, count, os.getpid())
    config = server_config(app, settings, factory=True, workers=count, loop="auto",
                           timeout_worker_healthcheck=HEALTHCHECK_S)
    supervisor = _Supervisor(config, sockets=[sock])
    try:
        supervisor.run()
    finally:
        _stop_resource_tracker()
    failed = [worker.pid for worker in supervisor.processes if worker.exitcode == STARTUP_FAILURE]
    if failed:
        log.error("worker %s failed to start; stopped", failed[0])
        return 1
    return 0


def _stop_resource_tracker() -> None:
    """Spawning starts multiprocessing's resource tracker beside the workers; it would exit
    only after the supervisor did (and wait to be reaped by whoever adopts it). Stopped and
    reaped here, so nothing of the gateway outlives its supervisor. ``_stop`` is private
    (Python 3.11 to 3.14 have it); without it the tracker exits on its own, a moment later."""
    from multiprocessing import resource_tracker

    stop = getattr(resource_tracker._resource_tracker, "_stop", None)
    if stop is not None:
        stop()


def _stop_when_orphaned(supervisor_pid: int, every_s: float = 1.0) -> None:
    """Stop this worker (SIGTERM to itself: uvicorn shuts down gracefully) once its supervisor
    is gone and it was re-parented."""
    while os.getppid() == supervisor_pid:
        time.sleep(every_s)
    log.warning("the supervisor (pid %d) is gone; stopping", supervisor_pid)
    os.kill(os.getpid(), signal.SIGTERM)
