"""Ownership on the Studio's signal routes (issue 9.2): with two principals, nobody watches
or stops another resource's reply. A thread of another resource behaves as if it did not
exist (404, nothing streamed, nothing aborted); a thread id that is free when bob
subscribes and then becomes alice's never streams her chunks to him.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from pathlib import Path

import httpx
import pytest

from dev_server.factory import create_app
from dev_server.settings import Settings
from tests.kit.chat import ReadChunks
from tests.kit.local_http import local_http
from tests.support import LiveApp, sqlite_rows

ALICE, BOB = {"authorization": "Bearer ta"}, {"authorization": "Bearer tb"}
AGENT = "/api/agents/chat-agent"


class Subscription(ReadChunks):
    """A ``threads/subscribe`` stream read in a thread; ``chunks`` fills as data arrives."""

    def __init__(self, url: str, headers: dict, thread_id: str) -> None:
        super().__init__()
        self.status: int | None = None
        self._client = httpx.Client(timeout=60, headers=headers)
        self._ready = threading.Event()
        self._socket = None
        self._thread = threading.Thread(target=self._read, args=(url, thread_id), daemon=True)
        self._thread.start()
        assert self._ready.wait(20)

    def _read(self, url: str, thread_id: str) -> None:
        try:
            with self._client.stream("POST", f"{url}{AGENT}/threads/subscribe", json={"threadId": thread_id}) as r:
                self.status = r.status_code
                self._socket = r.extensions["network_stream"].get_extra_info("socket")
                self._ready.set()
                self.collect(r.iter_lines())
        except httpx.HTTPError:
            pass  # closed by the test
        finally:
            self._ready.set()

    def close(self) -> None:
        """Hang up: the stream stays open while the thread exists, and only a shutdown of its
        socket wakes the reading thread (closing the client from here does not)."""
        if self._socket is not None:
            with contextlib.suppress(OSError):
                self._socket.shutdown(socket.SHUT_RDWR)
        self._thread.join(timeout=10)
        assert not self._thread.is_alive()
        self._client.close()


@pytest.fixture
def authed(data_dir: Path):
    with LiveApp(create_app("studio", Settings(data_dir=data_dir, auth_tokens="ta=alice,tb=bob"))) as server:
        yield server


def send(url: str, headers: dict, thread_id: str, text: str) -> dict:
    response = local_http.post(f"{url}{AGENT}/send-message", headers=headers, timeout=30,
                          json={"message": text, "threadId": thread_id, "resourceId": "chat-agent"})
    assert response.status_code == 200, response.text
    return response.json()


def test_bob_can_neither_watch_nor_stop_alices_reply(authed, data_dir: Path):
    db = data_dir / "dev-server.db"
    mine = Subscription(authed.url, ALICE, "alice-t")
    run = send(authed.url, ALICE, "alice-t", "a long answer please [[slower]]")
    mine.wait_for("text-delta")  # her reply is streaming, so her thread exists

    watch = local_http.post(f"{authed.url}{AGENT}/threads/subscribe", headers=BOB, json={"threadId": "alice-t"})
    assert watch.status_code == 404 and watch.json() == {"error": "Thread not found"}
    stop = local_http.post(f"{authed.url}{AGENT}/threads/abort", headers=BOB, json={"threadId": "alice-t"})
    assert stop.status_code == 404 and stop.json() == {"error": "Thread not found"}
    by_run = local_http.post(f"{authed.url}{AGENT}/threads/abort", headers=BOB,
                        json={"threadId": "bobs-own", "expectedRunId": run["runId"]})
    assert by_run.status_code == 404  # her run id on his (empty) thread is nothing of his
    stolen = local_http.post(f"{authed.url}{AGENT}/send-message", headers=BOB,
                        json={"message": "hi", "threadId": "alice-t", "resourceId": "user:alice"})
    assert stolen.status_code == 404

    mine.wait_for("finish")
    mine.close()
    assert "abort" not in mine.types()
    reply = json.loads(sqlite_rows(db, "SELECT content FROM messages WHERE thread_id = 'alice-t'"
                                       " AND role = 'assistant'")[0][0])
    assert "interrupted" not in reply["metadata"]  # nobody stopped it
    assert sqlite_rows(db, "SELECT count(*) FROM messages WHERE thread_id = 'alice-t'") == [(2,)]


def test_a_thread_id_bob_subscribed_to_first_never_streams_alices_run(authed):
    early = Subscription(authed.url, BOB, "shared-id")  # nobody owns it yet: allowed
    assert early.status == 200
    hers = Subscription(authed.url, ALICE, "shared-id")
    send(authed.url, ALICE, "shared-id", "hello")
    hers.wait_for("finish")
    early.close()
    hers.close()
    assert early.chunks == []
    assert hers.types()[0] == "data-user-message"


def test_alice_stops_her_own_reply(authed):
    mine = Subscription(authed.url, ALICE, "stop-me")
    run = send(authed.url, ALICE, "stop-me", "go on and on [[slower]]")
    mine.wait_for("text-delta")
    stop = local_http.post(f"{authed.url}{AGENT}/threads/abort", headers=ALICE,
                      json={"threadId": "stop-me", "expectedRunId": run["runId"]})
    assert stop.status_code == 200 and stop.json() == {"aborted": True}
    mine.wait_for("abort")
    mine.close()
