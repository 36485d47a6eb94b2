"""The Studio's "agent signals" chat: send a message, receive the run on a subscription.

``POST /threads/subscribe`` opens a long-lived stream per (agent, thread); ``POST
/send-message`` starts a run in the background and its chunks are published to every
subscriber of that thread, preceded by a ``data-user-message`` echo the Studio uses to
reconcile its optimistic bubble; ``POST /threads/abort`` cancels the active run. Runs on
one thread are serialised. All of this is in-process: subscribers and runs live in the
studio process that accepted them.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from typing import Any

Key = tuple[str, str]  # (agent id, thread id)


class ThreadHub:
    def __init__(self) -> None:
        self._subscribers: dict[Key, set[asyncio.Queue]] = defaultdict(set)
        self._runs: dict[Key, tuple[str, asyncio.Task]] = {}

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
            try:
                queue.put_nowait(chunk)
            except asyncio.QueueFull:  # a subscriber that stopped reading loses chunks, not the run
                pass

    def active_run(self, key: Key) -> tuple[str, asyncio.Task] | None:
        run = self._runs.get(key)
        return run if run and not run[1].done() else None

    def start(self, key: Key, run_id: str, work) -> asyncio.Task:
        previous = self.active_run(key)

        async def serialised() -> None:
            if previous is not None:
                await asyncio.gather(previous[1], return_exceptions=True)
            await work()

        task = asyncio.create_task(serialised())
        self._runs[key] = (run_id, task)

        def forget(done: asyncio.Task) -> None:
            if self._runs.get(key, (None, None))[1] is done:  # a later run may have replaced it
                del self._runs[key]

        task.add_done_callback(forget)
        return task

    def abort(self, key: Key, expected_run_id: str | None = None) -> bool:
        run = self.active_run(key)
        if run is None or (expected_run_id and run[0] != expected_run_id):
            return False
        run[1].cancel()
        return True

    async def close(self) -> None:
        tasks = [task for _, task in self._runs.values()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
