"""One turn path: turns on a thread are serialised in a process and across processes (the
gateway and the studio, and two workers of the gateway).

Two turns sent at once on one thread must be stored user, assistant, user, assistant, and
the second must see the first reply: the local model says how many earlier messages it
was given. Apps in this process (each with its own stores and locks, as a process has) over
one temp data dir, and real ``python -m dev_server`` processes where the gateway's workers are the
subject; the lease table is checked with a real SQLite file and an injected clock.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from contextlib import closing, contextmanager
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from dev_server.kernel.clock import ManualClock
from dev_server.storage.leases import ThreadLeases
from dev_server.storage.libsql import LibSQLStore
from tests.kit.local_http import local_http
from tests.kit.servers import serving
from tests.support import pinned_clients, sqlite_rows, user_message

EARLIER = re.compile(r"I can see (\d+) earlier messages?")


def thread_rows(db: Path, thread_id: str) -> list[tuple[str, dict]]:
    rows = sqlite_rows(db, "SELECT role, content FROM messages WHERE thread_id = ? ORDER BY created_at, seq",
                       (thread_id,))
    return [(role, json.loads(content)) for role, content in rows]


def assert_serialised(db: Path, thread_id: str) -> None:
    rows = thread_rows(db, thread_id)
    assert [role for role, _ in rows] == ["user", "assistant", "user", "assistant"], rows
    seen = [int(EARLIER.search(content["content"]).group(1)) for role, content in rows if role == "assistant"]
    assert seen == [0, 2], rows  # the second turn's context held the first turn and its reply


def at_once(*calls) -> list:
    results: list = [None] * len(calls)

    def run(index: int, call) -> None:
        results[index] = call()

    threads = [threading.Thread(target=run, args=(i, call)) for i, call in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return results


def gateway_turn(server, conversation: str, message_id: str, text: str, client: httpx.Client | None = None) -> int:
    body = {"id": "c", "conversationId": conversation, "messages": [user_message(message_id, text)]}
    with (client or httpx).stream("POST", f"{server.url}/api/chat", json=body, timeout=60) as response:
        response.read()
        return response.status_code


def studio_turn(server, thread_id: str, text: str) -> int:
    body = {"messages": text, "memory": {"thread": thread_id, "resource": "ai-chat"}}
    with local_http.stream("POST", f"{server.url}/api/agents/chat-agent/stream", json=body, timeout=60) as response:
        response.read()
        return response.status_code


@pytest.fixture
def db(data_dir: Path) -> Path:
    return data_dir / "dev-server.db"


@contextmanager
def gateway_of(workers: int, start_server, data_dir: Path, env: dict[str, str] | None = None) -> Iterator:
    """One worker: a gateway app in this process; more: ``python -m dev_server gateway`` and its workers."""
    if workers == 1:
        with serving("gateway", data_dir, env) as gateway:
            yield gateway
    else:
        yield start_server("gateway", env={**(env or {}), "DEV_SERVER_WORKERS": str(workers)})


@pytest.mark.parametrize("workers", [1, 2])
def test_two_gateway_turns_at_once_are_serialised(start_server, data_dir: Path, db: Path, workers: int):
    with gateway_of(workers, start_server, data_dir) as gateway:
        one, two = pinned_clients(gateway.url, 2, distinct=workers > 1)  # with two workers: one turn on each
        with closing(one), closing(two):
            statuses = at_once(lambda: gateway_turn(gateway, "g-both", "g1", "first [[slow]]", one),
                               lambda: gateway_turn(gateway, "g-both", "g2", "second [[slow]]", two))
        assert statuses == [200, 200]
        assert_serialised(db, "g-both")
        assert sqlite_rows(db, "SELECT count(*) FROM thread_leases") == [(0,)]  # released after the reply


def test_two_studio_streams_at_once_are_serialised(data_dir: Path, db: Path):
    with serving("studio", data_dir) as studio:
        assert at_once(lambda: studio_turn(studio, "s-both", "first [[slow]]"),
                       lambda: studio_turn(studio, "s-both", "second [[slow]]")) == [200, 200]
        assert_serialised(db, "s-both")


def test_send_message_back_to_back_keeps_order_and_context(data_dir: Path, db: Path):
    with serving("studio", data_dir) as studio:
        for text in ("first [[slow]]", "second [[slow]]"):
            response = local_http.post(f"{studio.url}/api/agents/chat-agent/send-message", timeout=30,
                                  json={"message": text, "threadId": "sig-both", "resourceId": "chat-agent"})
            assert response.status_code == 200 and response.json()["accepted"] is True
        rows = wait_for_rows(db, "sig-both", 4)
        assert [content["content"] for role, content in rows if role == "user"] == ["first [[slow]]", "second [[slow]]"]
        assert_serialised(db, "sig-both")


def test_one_turn_through_each_process_at_once_is_serialised(data_dir: Path, db: Path):
    with serving("gateway", data_dir) as gateway, serving("studio", data_dir) as studio:
        # the Studio names the resource after the agent, which is an alias of the gateway's ai-chat
        assert at_once(lambda: gateway_turn(gateway, "x-both", "x1", "from the frontend [[slow]]"),
                       lambda: studio_turn(studio, "x-both", "from the studio [[slow]]")) == [200, 200]
        assert_serialised(db, "x-both")


@pytest.mark.parametrize("workers", [1, 2])
def test_a_turn_that_waits_past_the_bound_is_a_409_and_writes_nothing(start_server, data_dir: Path, db: Path,
                                                                      workers: int):
    with gateway_of(workers, start_server, data_dir, {"DEV_SERVER_TURN_WAIT_S": "0.2"}) as gateway:
        one, two = pinned_clients(gateway.url, 2, distinct=workers > 1)
        with closing(one), closing(two), one.stream("POST", f"{gateway.url}/api/chat", timeout=60, json={
                "conversationId": "busy", "messages": [user_message("b1", "long [[slower]]")]}) as first:
            assert first.status_code == 200
            lines = first.iter_lines()  # kept: a dropped iterator would close the response
            next(lines)  # the first reply is streaming: its turn holds the thread
            second = two.post(f"{gateway.url}/api/chat", timeout=30,
                              json={"conversationId": "busy", "messages": [user_message("b2", "me too")]})
            assert second.status_code == 409, second.text
            assert second.json()["code"] == "THREAD_BUSY" and "busy" in second.json()["error"]
            assert sqlite_rows(db, "SELECT count(*) FROM messages WHERE id = 'b2'") == [(0,)]


def wait_for_rows(db: Path, thread_id: str, count: int, timeout: float = 30.0) -> list:
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rows = thread_rows(db, thread_id) if db.exists() else []
        if len(rows) >= count and rows[-1][0] == "assistant" and not rows[-1][1]["metadata"].get("interrupted"):
            return rows
        time.sleep(0.1)
    raise AssertionError(f"thread {thread_id} did not reach {count} messages: {thread_rows(db, thread_id)}")


# -- the lease table ----------------------------------------------------------------------


def at_ms(epoch_ms: int) -> ManualClock:
    return ManualClock(datetime.fromtimestamp(epoch_ms / 1000, UTC))


@pytest.fixture
async def leases_and_clock(tmp_path: Path):
    store = LibSQLStore(f"file:{tmp_path / 'leases.db'}")
    await store.open()
    clock = at_ms(1_000_000)
    try:
        yield ThreadLeases(store, clock=clock), clock
    finally:
        await store.close()


@pytest.mark.anyio
async def test_a_lease_is_exclusive_until_released_or_expired(leases_and_clock) -> None:
    leases, clock = leases_and_clock
    assert await leases.try_acquire("t", "a", ttl_s=10)
    assert not await leases.try_acquire("t", "b", ttl_s=10)
    assert await leases.try_acquire("other", "b", ttl_s=10)  # leases are per thread
    assert await leases.renew("t", "a", ttl_s=10)
    await leases.release("t", "b")  # not b's to release
    assert (await leases.current("t")).holder == "a"
    await leases.release("t", "a")
    assert await leases.current("t") is None and await leases.try_acquire("t", "b", ttl_s=10)


@pytest.mark.anyio
async def test_an_expired_lease_is_taken_over_and_its_holder_loses_it(leases_and_clock) -> None:
    leases, clock = leases_and_clock
    assert await leases.try_acquire("t", "killed", ttl_s=5)
    clock.advance(milliseconds=4_999)
    assert not await leases.try_acquire("t", "next", ttl_s=5)
    clock.advance(milliseconds=1)
    assert await leases.try_acquire("t", "next", ttl_s=5)  # expired: taken over
    assert not await leases.renew("t", "killed", ttl_s=5)  # the old holder cannot renew it back
    assert (await leases.current("t")).holder == "next"


def test_the_lease_is_renewed_while_a_long_reply_streams(data_dir: Path, db: Path):
    """The reply outlives the lease's expiry many times over; the other app must still wait
    for it (renewed), not take the thread over half-way."""
    env = {"DEV_SERVER_TURN_LEASE_S": "1"}
    with serving("gateway", data_dir, env) as gateway, serving("studio", data_dir, env) as studio:
        body = {"conversationId": "renewed", "messages": [user_message("r1", "a long one [[slower]]")]}
        with local_http.stream("POST", f"{gateway.url}/api/chat", json=body, timeout=60) as first:
            lines = first.iter_lines()
            next(lines)  # streaming for ~4 s from here, four lease lifetimes
            assert studio_turn(studio, "renewed", "the other process") == 200
            for _ in lines:
                pass
        assert_serialised(db, "renewed")
