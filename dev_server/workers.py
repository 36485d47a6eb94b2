"""N gateway processes serving one listening socket (``DEV_SERVER_WORKERS``).

``supervise(count, serve)`` is the parent: the caller has bound the socket once (so "port
in use" is one line) and opened and closed the stores once (so a bad database is one line
and the migrations run once), then it forks ``count`` workers, each of which runs
``serve(slot)`` (in ``dev_server.__main__``: uvicorn's ``Server.serve(sockets=[sock])`` under
uvloop, as a single process does) and accepts from the shared socket; the kernel hands
each new connection to whichever worker accepts first. A connection stays with the worker
that accepted it.

- Nothing is restarted: a worker that dies is logged with its exit code and the others go
  on serving; when the last one dies without being asked to stop, the parent exits 1.
- SIGINT or SIGTERM to the parent is forwarded to every worker as SIGTERM (after a
  terminal's Ctrl-C each worker already got one SIGINT, and uvicorn takes a second SIGINT
  as "force exit, skip shutdown"); the parent waits for them (``stop_timeout_s``, then
  SIGKILL) and exits 0 when all stopped cleanly.
- A worker whose parent is gone (SIGKILLed) stops itself (``watch_parent``), so no orphan
  keeps the port.

Why not uvicorn's own ``workers=`` (``uvicorn.supervisors.Multiprocess``): it spawns, so
every worker imports the app again; it restarts a dead worker on its own; and its workers
run ``Server.run`` with uvicorn's loop set-up instead of ours (stores opened before
serving, uvloop). Forking here is safe because the parent forks with one thread only and
no event loop running: every store, thread pool and loop is made in the worker.

Everything workers share is in the database (turn leases, messages, working memory,
titles); the studio stays one process because it alone opens the DuckDB file.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable

from dev_server.api.worker_slot import WorkerSlot

log = logging.getLogger(__name__)

_STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM}
def supervise(count: int, serve: Callable[[WorkerSlot], int], *, stop_timeout_s: float = 10.0) -> int:
    """Fork ``count`` workers running ``serve(slot)``; wait for them; the exit code."""
    _join_other_threads()
    parent = os.getpid()
    children: dict[int, int] = {}  # pid -> worker index
    # Blocked while forking: a signal landing in a child before it has its own handlers
    # would run the parent's (and signal its siblings).
    signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
    for index in range(count):
        pid = os.fork()
        if pid == 0:
            _child(serve, WorkerSlot(index, count, parent))  # never returns
        children[pid] = index
    stopping = False
    deadline = 0.0

    def stop(signum: int, _: object) -> None:
        nonlocal stopping, deadline
        if not stopping:
            log.info("%s: stopping %d workers", signal.Signals(signum).name, len(children))
            deadline = time.monotonic() + stop_timeout_s
        stopping = True
        for pid in children:
            _signal(pid, signal.SIGTERM)

    for signum in _STOP_SIGNALS:
        signal.signal(signum, stop)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)
    log.info("%d workers started (pids %s)", count, ", ".join(map(str, children)))

    exit_code = 0
    while children:
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
            if stopping and time.monotonic() > deadline:
                log.warning("workers %s did not stop within %.0f s: killed", sorted(children), stop_timeout_s)
                for child in children:
                    _signal(child, signal.SIGKILL)
                deadline = float("inf")
            time.sleep(0.05)
            continue
        if pid not in children:
            continue
        index = children.pop(pid)
        code = os.waitstatus_to_exitcode(status)
        if stopping:
            exit_code = exit_code or code
        else:
            described = f"signal {-code}" if code < 0 else f"code {code}"
            log.error("worker %d (pid %d) exited with %s; not restarted, %d left", index, pid, described,
                      len(children))
    if not stopping:
        log.error("every worker has exited; stopping")
        return 1
    return 0 if exit_code == 0 else 1


async def watch_parent(parent_pid: int, stop: Callable[[], None], every_s: float = 1.0) -> None:
    """Call ``stop`` once the supervisor is gone (this process was re-parented)."""
    while os.getppid() == parent_pid:
        await asyncio.sleep(every_s)
    log.warning("the supervisor (pid %d) is gone; stopping", parent_pid)
    stop()


def _child(serve: Callable[[WorkerSlot], int], slot: WorkerSlot) -> None:
    code = 1
    try:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)
        code = serve(slot)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
    except KeyboardInterrupt:
        code = 0
    except BaseException:
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code)  # never run the parent's exit handlers or return into its loop


def _signal(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signum)


def _join_other_threads(timeout_s: float = 2.0) -> None:
    """Fork from one thread only: a thread that is ending (a closed aiosqlite connection's)
    could hold a lock the child would inherit held."""
    for thread in threading.enumerate():
        if thread is not threading.main_thread():
            thread.join(timeout_s)
            if thread.is_alive():
                log.warning("thread %s still running before the workers fork", thread.name)
