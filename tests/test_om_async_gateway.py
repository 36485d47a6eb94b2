"""Observational Memory's async buffering through a live gateway (issue 12).

Small thresholds (600 message tokens, buffering every 200) make the background observer
(the built-in local model) run every few turns. The record is read back through a studio
on the same data dir with ``@mastra/client-js`` (``awaitBufferStatus`` waits for the
background work). Buffering at its intervals, with the parts judged by the real ``ai``
package, is tested in ``tests/test_om_gateway.py``.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.kit.chat import turn
from tests.kit.om import ASYNC_ENV, FACT, await_buffer, parts
from tests.kit.servers import server_fixture
from tests.kit.studio_ui import run_studio


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("om-async")


gateway = server_fixture("gateway", data="data", env=ASYNC_ENV)
studio = server_fixture("studio", data="data", after=("gateway",), env=ASYNC_ENV)


def test_chunks_survive_a_restart_and_a_dead_processs_flag_is_taken_over(gateway: Any, studio: Any,
                                                                         data: Path) -> None:
    db = data / "dev-server.db"
    for i in range(1, 5):
        result = turn(gateway, "restart", f"r{i}", f"Turn {i}. {FACT}")
        record = await_buffer(studio.url, "restart")
        if record["bufferedObservationChunks"]:
            break
    assert record["bufferedObservationChunks"] and not parts(result, "activation")
    chunk_ids = [c["id"] for c in record["bufferedObservationChunks"]]
    gateway.stop()
    # a gateway killed mid-buffering leaves its flag behind, never renewed
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE mastra_observational_memory SET is_buffering_observation = '2026-01-01T00:00:00.000Z'"
                     " WHERE lookup_key = 'thread:restart'")
    gateway.start()
    gateway.wait_healthy()
    assert await_buffer(studio.url, "restart")["isBufferingObservation"] is True  # as stored: a flag is a flag
    # one long message takes the window over the threshold: the stored chunks activate at once
    result = turn(gateway, "restart", "r-long", " ".join([FACT] * 12))
    activations = parts(result, "activation")
    assert activations and activations[0]["triggeredBy"] == "threshold"
    after = await_buffer(studio.url, "restart")
    assert after["isBufferingObservation"] is False  # the turn found the dead flag and cleared it
    assert not {c["id"] for c in after["bufferedObservationChunks"] or []} & set(chunk_ids[:len(activations)])
    # and the next interval buffers again: the stale flag was taken over
    assert any(parts(turn(gateway, "restart", f"r-next{i}", f"More. {FACT}"), "buffering-start")
               for i in range(4))
    assert await_buffer(studio.url, "restart")["isBufferingObservation"] is False


@pytest.mark.e2e
def test_the_real_studio_shows_buffered_observations_and_chats_on_the_same_thread(gateway: Any, studio: Any,
                                                                                  data: Path) -> None:
    for i in range(1, 5):
        turn(gateway, "shown-async", f"sa{i}", f"Turn {i}. {FACT}")
        record = await_buffer(studio.url, "shown-async")
    assert record["bufferedObservationChunks"]
    # the Studio renders the stored buffering markers as a "Buffered observations" badge, and its
    # own turn on the thread runs OM in the studio process, on the same record
    result = run_studio(studio, threadId="shown-async", expectThreadText="Buffered observations",
                        sendText="What is my name?")
    assert "Your name is Ada Lovelace" in result["replyText"]
    after = await_buffer(studio.url, "shown-async")  # the studio's turn wrote the same record's window
    assert after["id"] == record["id"] and after["pendingMessageTokens"] > record["pendingMessageTokens"]
