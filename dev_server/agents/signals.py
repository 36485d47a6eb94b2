"""The Studio's "agent signals" chat: send a message, receive the run on a subscription.

``POST /threads/subscribe`` opens a long-lived stream per key; ``POST /send-message``
starts a run in the background and its chunks are published to every subscriber of that
key, preceded by a ``data-user-message`` echo the Studio uses to reconcile its optimistic
bubble; ``POST /threads/abort`` cancels the key's runs. A key is (agent id, resource in
force, thread id): with authentication on, a principal can only ever subscribe to, or
abort, runs of its own resource, whatever thread id it names.

Subscribers and runs live in the studio process that accepted them, which is why the
studio is always one process (``DEV_SERVER_WORKERS`` applies to the gateway only, whose
chat has no subscribe or abort of a running turn): a subscribe or abort always reaches the
process running the turn. Runs on one thread
are not serialised here: every run starts its turn through ``dev_server.agents.turns``, which
orders them (across processes too) in the order they were started.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import defaultdict
from collections.abc import Awaitable, Callable
from typing import Any

Key = tuple[str, str, str]  # (agent id, resource in force or "", thread id)


class ThreadHub:
    def __init__(self) -> None:
        self._subscribers: dict[Key, set[asyncio.Queue]] = defaultdict(set)
        self._runs: dict[Key, dict[str, asyncio.Task]] = defaultdict(dict)

    def subscribe(self, key: Key) -> asyncio.Queue:
        queue: asyncio.Queue = asyncio.Queue(maxsize=10_000)
        self._subscribers[key].add(queue)
        return queue

    def unsubscribe(self, key: Key, queue: asyncio.Queue) -> None:
        self._subscribers[key].discard(queue)
        if not self._subscribers[key]:
            del self._subscribers[key]

    def publish(self, key: Key, chunk: dict[str, Any]) -> None:
        for queue in list(self._subscribers.get(key, ())):
            with contextlib.suppress(asyncio.QueueFull):  # a subscriber that stopped reading loses chunks, not the run
                queue.put_nowait(chunk)

    def has_runs(self, key: Key) -> bool:
        return any(not task.done() for task in self._runs.get(key, {}).values())

    def start(self, key: Key, run_id: str, work: Callable[[], Awaitable[None]]) -> asyncio.Task:
        task = asyncio.create_task(work())
        self._runs[key][run_id] = task

        def forget(done: asyncio.Task) -> None:
            runs = self._runs.get(key)
            if runs is not None and runs.get(run_id) is done:
                del runs[run_id]
                if not runs:
                    del self._runs[key]

        task.add_done_callback(forget)
        return task

    def abort(self, key: Key, expected_run_id: str | None = None) -> bool:
        """Cancel the key's runs (only ``expected_run_id`` when given); False if none was active."""
        runs = self._runs.get(key, {})
        targets = [task for run_id, task in runs.items()
                   if not task.done() and (expected_run_id is None or run_id == expected_run_id)]
        for task in targets:
            task.cancel()
        return bool(targets)

    async def close(self) -> None:
        tasks = [task for runs in self._runs.values() for task in runs.values()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
