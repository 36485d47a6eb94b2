"""A turn's ``finish`` reaches the client only once its reply is stored as finished.

A client that sees ``finish`` and reads the thread (the Studio refetches its messages, a
``useChat`` app reloads) must find the whole reply, not a checkpoint marked interrupted.
The test holds SQLite's write lock from its own connection while the reply streams (no
checkpoint is due meanwhile), so the server's final save waits: no ``finish`` may arrive
while it waits, and once the lock is released the stored reply is there, finished, by the
time ``finish`` arrives.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from pathlib import Path

import httpx

from dev_server.factory import create_app
from dev_server.settings import Settings
from tests.kit.chat import ReadChunks
from tests.support import LiveApp, sqlite_rows, user_message


class ChatStream(ReadChunks):
    """A ``/api/chat`` stream read in a thread."""

    def __init__(self, url: str, body: dict) -> None:
        super().__init__()
        self._thread = threading.Thread(target=self._read, args=(url, body), daemon=True)
        self._thread.start()

    def _read(self, url: str, body: dict) -> None:
        with httpx.Client(timeout=60) as client, client.stream("POST", f"{url}/api/chat", json=body) as response:
            self.collect(response.iter_lines())

    def join(self) -> None:
        self._thread.join(timeout=30)
        assert not self._thread.is_alive()


def test_finish_arrives_only_after_the_reply_is_stored_finished(data_dir: Path):
    db = data_dir / "dev-server.db"
    settings = Settings(data_dir=data_dir, telemetry=False, checkpoint_interval_s=600)
    with LiveApp(create_app("gateway", settings)) as server:
        chat = ChatStream(server.url, {"id": "c", "conversationId": "t-finish",
                                       "messages": [user_message("u1", "a slow answer please [[slow]]")]})
        chat.wait_for("text-delta")  # the user's message is stored; no write is due until the reply's
        lock = sqlite3.connect(db, timeout=10, isolation_level=None)
        lock.execute("BEGIN IMMEDIATE")  # the server's writes now wait (its busy timeout is 5 s)
        try:
            chat.wait_for("text-end")
            time.sleep(1.0)  # a finish sent before the save would be here by now
            assert "finish" not in chat.types()
        finally:
            lock.execute("ROLLBACK")
            lock.close()
        chat.wait_for("finish")
        reply = json.loads(sqlite_rows(db, "SELECT content FROM messages WHERE thread_id = 't-finish'"
                                           " AND role = 'assistant'")[0][0])
        chat.join()
    assert "interrupted" not in reply["metadata"] and reply["metadata"]["finishReason"] == "stop"
