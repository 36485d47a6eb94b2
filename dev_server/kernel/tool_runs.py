"""Running a synchronous tool function off the event loop, under a deadline that holds.

A tool's function decides where it runs (``dev_server.kernel.tools.execute``):

* a coroutine function is awaited on the event loop under ``asyncio.timeout``: it must only
  await (I/O, another agent's turn), which is what lets the timeout interrupt it;
* a plain function runs in a **thread** of its own (``run_sync``): the loop awaits it under
  the deadline, and past the deadline the call is a timeout error while the thread, which
  Python cannot stop, is abandoned and ends whenever its work does (its result is dropped).
  The threads are daemons, so an abandoned one never holds up the process's exit, and at
  most ``MAX_THREADS`` run at once (abandoned ones count until they end): a call waits for
  a slot within its own deadline. Right for blocking I/O and for work bounded by itself
  (the calculator: between two bytecodes a thread lets the loop run);
* a plain function of a tool marked ``cpu_bound`` runs in a **child process**, forked from
  a forkserver (a clean process, not a copy of this one with its open stores and threads)
  and killed at the deadline or when the call is cancelled. A thread is not enough for
  work that is CPU-bound and unbounded: one long C-level operation (a big-integer power, a
  backtracking regular expression) holds the GIL, and the event loop waits with it. The
  function must be importable by name (a module-level function), its input and output
  picklable, and it gets the call's ids but no trace context and no ``ask_agent``. A child
  costs ~10 ms (the forkserver ~0.5 s once, on the first call).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import multiprocessing
import threading
import time
from collections.abc import Callable
from functools import partial
from multiprocessing.connection import Connection
from typing import Any

MAX_THREADS = 32
_POLL_S = 0.05  # how often a supervising thread looks for a cancelled call
_slots = threading.BoundedSemaphore(MAX_THREADS)
_forkserver_lock = threading.Lock()
_forkserver: Any = None


async def run_sync(function: Callable[[Any, Any], Any], args: Any, context: Any, *, timeout_s: float,
                   cpu_bound: bool = False, name: str = "tool") -> Any:
    """``function(args, context)`` in a thread (a child process when ``cpu_bound``); raises
    ``TimeoutError`` past ``timeout_s``, or what the function raised."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()
    stop = threading.Event()
    deadline = time.monotonic() + timeout_s
    work = (partial(_in_child, function, args, _picklable(context), deadline, stop) if cpu_bound
            else partial(function, args, context))
    threading.Thread(target=_run, args=(loop, future, work, deadline), name=f"tool-{name}", daemon=True).start()
    try:
        async with asyncio.timeout(timeout_s):
            return await future
    finally:
        stop.set()  # a child still running is killed now (a thread cannot be)


def _run(loop: asyncio.AbstractEventLoop, future: asyncio.Future[Any], work: Callable[[], Any],
         deadline: float) -> None:
    if not _slots.acquire(timeout=max(0.0, deadline - time.monotonic())):
        return  # every slot is taken until the deadline: the caller times out
    try:
        result, error = work(), None
    except Exception as exc:
        result, error = None, exc
    except BaseException as exc:  # SystemExit from a tool is not this process's exit
        result, error = None, RuntimeError(f"the tool raised {type(exc).__name__}")
    finally:
        _slots.release()
    with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits for this any more
        loop.call_soon_threadsafe(_settle, future, result, error)


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.done():  # the caller timed out or was cancelled
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


def _picklable(context: Any) -> Any:
    """The call's ids only: a trace context and the runner's ``ask_agent`` stay in this process."""
    if dataclasses.is_dataclass(context):
        return dataclasses.replace(context, trace_context=None, ask_agent=None)
    return context


def _context() -> Any:
    global _forkserver
    with _forkserver_lock:
        if _forkserver is None:
            _forkserver = multiprocessing.get_context("forkserver")
            _forkserver.set_forkserver_preload(["dev_server.kernel.tools"])  # pydantic, imported once for all children
        return _forkserver


def _in_child(function: Callable[[Any, Any], Any], args: Any, context: Any, deadline: float,
              stop: threading.Event) -> Any:
    """Run in a child process, polled until it answers, the deadline passes or ``stop`` is set."""
    mp = _context()
    receiver, sender = mp.Pipe(duplex=False)
    process = mp.Process(target=_child_main, args=(sender, function, args, context), daemon=True)
    try:
        process.start()
        sender.close()
        while not receiver.poll(_POLL_S):
            if stop.is_set() or time.monotonic() >= deadline:
                raise TimeoutError("the tool's process was stopped at its deadline")
        try:
            ok, value = receiver.recv()
        except EOFError:
            process.join()
            raise RuntimeError(f"the tool's process ended without an answer (exit code {process.exitcode})") from None
    finally:
        receiver.close()
        if process.pid is not None:
            if process.is_alive():
                process.kill()
            process.join()
            process.close()
    if not ok:
        raise value
    return value


def _child_main(sender: Connection, function: Callable[[Any, Any], Any], args: Any, context: Any) -> None:
    try:
        answer = (True, function(args, context))
    except Exception as exc:
        answer = (False, exc)
    try:
        sender.send(answer)
    except Exception as exc:  # a result or an exception that does not pickle
        sender.send((False, RuntimeError(f"the tool's answer cannot be sent back: {type(exc).__name__}: {exc}")))
    finally:
        sender.close()
