"""Background work (dev_server.background): bounded, deduplicated, drained by the lifespan, in /health."""

from __future__ import annotations

import asyncio
import logging
import threading

import pytest

from dev_server.background import BackgroundWork
from dev_server.factory import create_app
from tests.kit.local_http import local_http
from tests.support import LiveApp

pytestmark = pytest.mark.anyio


def recorder(done: list[str], name: str, gate: asyncio.Event | None = None):
    async def job() -> None:
        if gate is not None:
            await gate.wait()
        await asyncio.sleep(0)
        done.append(name)
    return job


async def test_drain_runs_every_queued_job_before_it_returns() -> None:
    work = BackgroundWork(workers=2)
    await work.start()
    done: list[str] = []
    for i in range(10):
        assert work.submit(f"job:{i}", recorder(done, f"job:{i}"))
    await work.drain()
    assert sorted(done) == sorted(f"job:{i}" for i in range(10))
    assert work.stats() == {"queued": 0, "running": 0, "done": 10, "failed": 0, "dropped": 0,
                            "deduplicated": 0, "maxQueued": work.max_queued,
                            "byKind": {"job": {"submitted": 10, "done": 10}}}
    assert not work.submit("late", recorder(done, "late"))  # drained: nothing new is accepted


async def test_a_full_queue_drops_the_job_with_a_log_line_and_never_blocks(caplog) -> None:
    work = BackgroundWork(workers=1, max_queued=2)
    await work.start()
    gate, done = asyncio.Event(), []
    assert work.submit("busy", recorder(done, "busy", gate))
    await asyncio.sleep(0.01)  # the worker took it: the queue is empty again
    assert work.submit("a", recorder(done, "a")) and work.submit("b", recorder(done, "b"))
    with caplog.at_level(logging.WARNING, logger="dev_server.background"):
        assert work.submit("c", recorder(done, "c")) is False
    assert "background job c dropped: the queue is full" in caplog.text
    assert work.stats()["dropped"] == 1 and work.stats()["queued"] == 2 and work.stats()["running"] == 1
    gate.set()
    await work.drain()
    assert done == ["busy", "a", "b"]


async def test_one_job_per_key_is_queued_or_running_at_a_time() -> None:
    work = BackgroundWork(workers=1)
    await work.start()
    gate, done = asyncio.Event(), []
    assert work.submit("title:t1", recorder(done, "first", gate))
    await asyncio.sleep(0.01)  # running now
    assert work.submit("title:t1", recorder(done, "second")) is False
    assert work.submit("title:t2", recorder(done, "other"))
    gate.set()
    await asyncio.sleep(0.05)
    assert work.submit("title:t1", recorder(done, "third"))  # the first finished: the key is free
    await work.drain()
    assert done == ["first", "other", "third"] and work.stats()["deduplicated"] == 1


async def test_a_follow_up_keeps_its_key_busy_from_one_job_to_the_next() -> None:
    work = BackgroundWork(workers=2)
    await work.start()
    done: list[int] = []
    seen_idle: list[bool] = []

    async def piece(n: int) -> None:
        await asyncio.sleep(0)
        done.append(n)
        if n < 5:
            assert work.follow_up("catch-up:t", lambda: piece(n + 1))
            assert not work.follow_up("catch-up:t", lambda: piece(99))  # one follow-up at a time

    async def watch() -> None:  # what a poller sees while the pieces run
        while len(done) < 5:
            seen_idle.append(not work.busy("catch-up:t"))
            await asyncio.sleep(0)

    assert work.submit("catch-up:t", lambda: piece(1))
    await asyncio.wait_for(watch(), 5)
    await asyncio.sleep(0.01)
    assert done == [1, 2, 3, 4, 5] and seen_idle and not any(seen_idle)  # never free in between
    assert not work.busy("catch-up:t") and not work.follow_up("catch-up:t", lambda: piece(99))  # ended
    await work.drain()
    assert work.stats()["byKind"]["catch-up"] == {"submitted": 5, "done": 5}


async def test_a_failing_job_is_logged_counted_and_the_next_one_runs(caplog) -> None:
    work = BackgroundWork(workers=1)
    await work.start()
    done: list[str] = []

    async def broken() -> None:
        raise ValueError("no model today")

    with caplog.at_level(logging.WARNING, logger="dev_server.background"):
        work.submit("broken", broken)
        work.submit("fine", recorder(done, "fine"))
        await work.drain()
    assert done == ["fine"] and work.stats()["failed"] == 1 and work.stats()["done"] == 1
    assert "background job broken failed: ValueError: no model today" in caplog.text


async def test_a_job_still_running_past_the_drain_bound_is_cancelled(caplog) -> None:
    work = BackgroundWork(workers=1)
    await work.start()
    cancelled = asyncio.Event()

    async def stuck() -> None:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    work.submit("stuck", stuck)
    await asyncio.sleep(0.01)
    with caplog.at_level(logging.WARNING, logger="dev_server.background"):
        await work.drain(timeout_s=0.1)
    assert cancelled.is_set() and "1 running and 0 queued jobs cancelled at shutdown" in caplog.text


async def test_a_job_is_not_cancelled_with_the_task_that_queued_it() -> None:
    work = BackgroundWork(workers=1)
    await work.start()
    done: list[str] = []

    async def request() -> None:  # stands for a request handler that is cancelled (client hung up)
        work.submit("title:x", recorder(done, "title"))
        await asyncio.sleep(60)

    handler = asyncio.create_task(request())
    await asyncio.sleep(0.01)
    handler.cancel()
    await work.drain()
    assert done == ["title"]


def test_health_shows_the_background_counts_and_the_lifespan_drains_them(settings) -> None:
    app = create_app("gateway", settings)
    work = app.state.services.background
    done: list[str] = []
    with LiveApp(app) as live:
        report = local_http.get(f"{live.url}/health").json()["background"]
        assert report == {"queued": 0, "running": 0, "done": 0, "failed": 0, "dropped": 0, "deduplicated": 0,
                          "maxQueued": work.max_queued, "byKind": {}}

        release = threading.Event()  # the job runs until the test has seen it running

        async def slow() -> None:
            while not release.is_set():
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.2)  # still running when the shutdown starts
            done.append("slow")

        # submitted from the server's own loop, as an output processor does
        asyncio.run_coroutine_threadsafe(_submit(work, "slow", slow), _loop_of(work)).result(5)
        assert local_http.get(f"{live.url}/health").json()["background"]["running"] == 1
        release.set()
    assert done == ["slow"]  # the shutdown waited for it


async def _submit(work: BackgroundWork, key: str, factory) -> None:
    assert work.submit(key, factory)
    await asyncio.sleep(0.05)  # let the worker pick it up


def _loop_of(work: BackgroundWork) -> asyncio.AbstractEventLoop:
    return work._group_task.get_loop()  # the server's loop, which the lifespan started the group on
