"""Group commit: the writes asked for while the writer is busy go out as one transaction.

A store has one writer (one thread, one connection), and a write is a unit of work
(``run_write(work)``). Writes queue here in the order they were asked for; whenever the
writer is free it takes everything queued (up to ``max_group``) and runs it as one group.
A write that finds the writer idle runs at once, alone: grouping never waits for company,
it only shares the ``BEGIN IMMEDIATE ... COMMIT`` (the file lock, the WAL pages, the
thread hops) between writes that would have waited for each other anyway.

What each caller is promised is what it was promised alone (docs/architecture.md#group-commit):

* its future is resolved only after the group's ``COMMIT``: an answer means committed;
* a work that raises gets its own error and the rest of the group commits without it
  (how each store achieves that: ``libsql.run_group``, ``remote.RemoteLibSQLStore``);
* works run, and see each other's writes, in the order they were asked for: the group is
  the same serial history as one transaction each;
* a write cancelled while it is still queued is skipped; once it has started it runs to
  the group's end.

When the group as a whole cannot commit (the ``COMMIT`` fails, or SQLite ended the whole
transaction inside a work: disk full, I/O error), nothing of it was committed, so the works
not answered yet run again one transaction each and every caller gets its own outcome. So a
work may run more than once before it commits: it must have no effect outside its
transaction (the remote store already re-ran works after a lock timeout).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

DEFAULT_MAX_GROUP = 64  # writes per transaction at most: a bound on how long one group holds the lock


class Outcome:
    """What one write came to, set on the writer thread (the ``set_result`` / ``set_exception``
    / ``done`` of a future); the caller's asyncio future gets it once the write's group has
    ended, in one call to the caller's loop for the whole group. So a write costs the loop one
    asyncio future: no thread-safe future of its own, no wake-up of the loop per write."""

    __slots__ = ("caller", "result", "error", "settled")

    def __init__(self, caller: asyncio.Future[Any]) -> None:
        self.caller = caller
        self.result: Any = None
        self.error: BaseException | None = None
        self.settled = False

    def set_running_or_notify_cancel(self) -> bool:
        """False when the caller gave up while the write was queued: it is skipped."""
        return not self.caller.cancelled()  # read across threads: a cancel just after runs the write anyway

    def set_result(self, result: Any) -> None:
        self.result, self.settled = result, True

    def set_exception(self, error: BaseException) -> None:
        self.error, self.settled = error, True

    def done(self) -> bool:
        return self.settled


@dataclass(slots=True)
class Write:
    work: Callable[[Any], Any]
    outcome: Outcome

    def run_alone(self, transaction: Callable[[Callable[[Any], Any]], Any]) -> None:
        """Run the work as ``transaction`` runs a work (a transaction of its own) and settle its
        outcome with its result or its error."""
        try:
            result = transaction(self.work)
        except BaseException as exc:
            self.outcome.set_exception(exc)
        else:
            self.outcome.set_result(result)


class WriteQueue:
    """The writes waiting for the writer thread, and the loop that drains them in groups.

    ``run_group(writes)`` runs on the writer thread and must settle every write's outcome."""

    def __init__(self, executor: ThreadPoolExecutor, run_group: Callable[[list[Write]], None],
                 max_group: int = DEFAULT_MAX_GROUP) -> None:
        self._executor = executor
        self._run_group = run_group
        self.max_group = max(1, max_group)
        self._pending: deque[Write] = deque()
        self._lock = threading.Lock()
        self._draining = False
        self.groups = 0  # transactions run, and
        self.writes = 0  # the writes they carried (for /health and the benchmarks)

    def __len__(self) -> int:
        return len(self._pending)

    def submit(self, work: Callable[[Any], Any]) -> asyncio.Future[Any]:
        """Queue ``work``; its result (or error) once its group has committed. From the event
        loop's thread."""
        write = Write(work, Outcome(asyncio.get_running_loop().create_future()))
        with self._lock:
            self._pending.append(write)
            start, self._draining = not self._draining, True
        if start:
            self._executor.submit(self._drain)
        return write.outcome.caller

    def _drain(self) -> None:
        while True:
            with self._lock:
                if not self._pending:
                    self._draining = False
                    return
                taken = [self._pending.popleft() for _ in range(min(self.max_group, len(self._pending)))]
            group = [w for w in taken if w.outcome.set_running_or_notify_cancel()]  # cancelled: skipped
            if not group:
                continue
            self.groups += 1
            self.writes += len(group)
            try:
                self._run_group(group)
            except BaseException as exc:  # a bug in run_group must not strand the callers
                for write in group:
                    if not write.outcome.done():
                        write.outcome.set_exception(exc)
            _hand_back(group)


def _hand_back(group: list[Write]) -> None:
    """Give each caller its write's outcome, on its own loop, one call per loop."""
    by_loop: dict[asyncio.AbstractEventLoop, list[Outcome]] = {}
    for write in group:
        by_loop.setdefault(write.outcome.caller.get_loop(), []).append(write.outcome)
    for loop, outcomes in by_loop.items():
        with contextlib.suppress(RuntimeError):  # the loop closed: nobody waits any more
            loop.call_soon_threadsafe(_settle, outcomes)


def _settle(outcomes: list[Outcome]) -> None:
    for outcome in outcomes:
        if outcome.caller.done():  # cancelled while it ran
            continue
        if not outcome.settled:
            outcome.caller.set_exception(RuntimeError("the write queue left a write without an outcome"))
        elif outcome.error is not None:
            outcome.caller.set_exception(outcome.error)
        else:
            outcome.caller.set_result(outcome.result)
