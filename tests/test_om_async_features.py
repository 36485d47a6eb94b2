"""Observational Memory's triggers and budgets through a live gateway (real uvicorn, in this
process so the OM clock can be moved) and the real ``ai`` package (issue 12): idle and
provider-change activation, buffered reflection, temporal markers, the shared token
budget, and the background work's counts in ``/health``."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.agents import chat_agent
from app.agents.registry import DEFINITIONS
from app.factory import create_app
from app.om import temporal
from app.om.resource import section_id
from app.settings import Settings
from tests.support import LiveApp
from tests.test_om_async_gateway import parts, pending, record_row, status
from tests.test_om_gateway import FACT, turn

BUFFERED = {"observation": {"messageTokens": 600, "bufferTokens": 200}, "reflection": {"observationTokens": 5000}}


@contextmanager
def gateway(data: Path, options: dict[str, Any], agents: Any = DEFINITIONS) -> Iterator[LiveApp]:
    settings = Settings(data_dir=data, telemetry=False, om_options=options)
    with LiveApp(create_app("gateway", settings, agents=agents)) as server:
        yield server


def buffered(db: Path, thread: str, timeout: float = 30.0) -> dict[str, Any]:
    """The record once no background observer or reflector holds it."""
    deadline = time.monotonic() + timeout
    while True:
        row = record_row(db, thread)
        if not row["is_buffering_observation"] and not row["is_buffering_reflection"]:
            return row
        assert time.monotonic() < deadline, "background work did not finish"
        time.sleep(0.05)


def chat_until_chunks(server: LiveApp, db: Path, thread: str) -> list[dict[str, Any]]:
    results = []
    for i in range(1, 8):
        results.append(turn(server, thread, f"{thread}-{i}", f"Turn {i}. {FACT}"))
        if buffered(db, thread)["buffered_observation_chunks"] and pending(results[-1]) >= 300:
            return results
    raise AssertionError("no chunk was buffered")


def test_an_idle_thread_activates_its_chunks_when_the_cache_would_be_cold(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "dev-server.db"
    with gateway(tmp_path, {**BUFFERED, "activateAfterIdle": "5m"}) as server:
        results = chat_until_chunks(server, db, "idle")
        assert not any(parts(r, "activation") for r in results)  # below the threshold: nothing yet
        chunks = buffered(db, "idle")["buffered_observation_chunks"]
        later = time.time() + 6 * 60
        monkeypatch.setattr(temporal, "clock", lambda: later)
        result = turn(server, "idle", "idle-back", "I am back. What was I planning?")
    activations = parts(result, "activation")
    assert activations and all(a["triggeredBy"] == "ttl" for a in activations)
    assert all(a["ttlExpiredMs"] >= 300_000 and a["config"]["activateAfterIdle"] == 300_000 and a["lastActivityAt"]
               for a in activations)
    assert pending(result) < pending(results[-1])  # the activated messages left the window, below the threshold
    assert len(activations) <= len(chunks)


def test_a_new_model_activates_the_chunks_its_cache_never_saw(tmp_path: Path) -> None:
    db = tmp_path / "dev-server.db"
    options = {**BUFFERED, "activateOnProviderChange": True}
    with gateway(tmp_path, options) as server:
        chat_until_chunks(server, db, "switch")
        same = turn(server, "switch", "switch-same", "Still here.")
        assert not any(a["triggeredBy"] == "provider_change" for a in parts(same, "activation"))
        buffered(db, "switch")
    other = dataclasses.replace(chat_agent.definition, model="anthropic/claude-sonnet-4-5")
    with gateway(tmp_path, options, agents=(other,)) as server:  # a restart with the agent on another provider
        result = turn(server, "switch", "switch-new", "Hello from the new model.")
    activations = parts(result, "activation")
    assert activations and activations[0]["triggeredBy"] == "provider_change"
    assert (activations[0]["previousModel"], activations[0]["currentModel"]) == (
        "openai/gpt-4o-mini", "anthropic/claude-sonnet-4-5")


def test_reflection_is_buffered_then_swapped_in_at_its_threshold(tmp_path: Path) -> None:
    db = tmp_path / "dev-server.db"
    options = {"observation": {"messageTokens": 600, "bufferTokens": 200}, "reflection": {"observationTokens": 500}}
    reflection_parts, windows = [], []
    with gateway(tmp_path, options) as server:
        for i in range(1, 16):
            result = turn(server, "reflect", f"r{i}", f"Turn {i}. {FACT}")
            windows.append(status(result)["windows"]["buffered"]["reflection"])
            reflection_parts += [(kind, p) for kind in ("buffering-start", "buffering-end", "activation")
                                 for p in parts(result, kind) if p["operationType"] == "reflection"]
            buffered(db, "reflect")
            if any(kind == "activation" for kind, _ in reflection_parts):
                break
    # data-om-status shows the buffered reflection waiting, with its compression (input -> output tokens)
    waiting = [w for w in windows if w["status"] == "complete"]
    assert waiting and all(0 < w["observationTokens"] < w["inputObservationTokens"] for w in waiting)
    starts = [p for kind, p in reflection_parts if kind == "buffering-start"]
    assert starts and starts[0]["cycleId"].startswith("reflect-buf-")
    [activation] = [p for kind, p in reflection_parts if kind == "activation"]
    assert activation["generationCount"] == 1 and activation["messagesActivated"] == 0
    assert activation["tokensActivated"] >= 250  # it began at bufferActivation 0.5 of 500
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT generation_count, origin_type, buffered_reflection FROM mastra_observational_memory"
                            " WHERE lookup_key = 'thread:reflect' ORDER BY generation_count").fetchall()
    assert rows[:2] == [(0, "initial", None), (1, "reflection", None)]
    assert record_row(db, "reflect")["observation_token_count"] == activation["observationTokens"] or len(rows) > 2


def test_a_long_silence_is_marked_before_the_next_message(tmp_path: Path) -> None:
    db = tmp_path / "dev-server.db"
    with gateway(tmp_path, {"temporalMarkers": True, "observation": {"messageTokens": 250, "bufferTokens": False}}) \
            as server:
        turn(server, "gap", "g1", FACT)
        with sqlite3.connect(db) as conn:  # three days pass
            conn.execute("UPDATE messages SET created_at = strftime('%Y-%m-%dT%H:%M:%fZ', created_at, '-3 days')")
        result = turn(server, "gap", "g2", "Hello again, do you remember me?")
        [gap] = parts(result, "temporal-gap")
        assert gap["gapMs"] >= 3 * 86_400_000 and "3 days passed" in gap["text"]
        with sqlite3.connect(db) as conn:
            rows = conn.execute("SELECT id, role, content FROM messages WHERE thread_id = 'gap'"
                                " ORDER BY created_at, seq").fetchall()
        assert [r[1] for r in rows] == ["user", "assistant", "user", "user", "assistant"]
        assert rows[2][0].startswith("temporal-gap-") and "<system-reminder>" in rows[2][2] and rows[3][0] == "g2"
        # the observer reads it with the rest
        observed = turn(server, "gap", "g3", f"Once more: {FACT}")
        ends = [p for p in parts(observed, "observation-end") if p["operationType"] == "observation"]
        assert ends and "3 days passed" in ends[0]["observations"]


def test_a_shared_budget_gives_messages_what_observations_do_not_use(tmp_path: Path) -> None:
    options = {"shareTokenBudget": True, "observation": {"messageTokens": 300, "bufferTokens": False},
               "reflection": {"observationTokens": 400}}
    with gateway(tmp_path, options) as server:
        results = [turn(server, "shared", f"s{i}", f"Turn {i}. {FACT}") for i in range(1, 9)]
        health = httpx.get(f"{server.url}/health").json()
    windows = [status(r)["windows"]["active"] for r in results]
    assert windows[0]["messages"]["threshold"] == 700  # 300 + 400, nothing observed yet
    observed = next(i for i, r in enumerate(results) if parts(r, "observation-end"))
    assert pending(results[observed - 1]) < 700 <= pending(results[observed - 1]) + 200
    after = windows[observed]
    assert after["messages"]["threshold"] == max(700 - after["observations"]["tokens"], 300)
    assert after["observations"]["threshold"] == max(700 - after["messages"]["threshold"], 1000)
    assert health["background"]["done"] >= 1 and health["background"]["failed"] == 0  # the title job ran there
    assert health["background"]["byKind"]["title"]["done"] == 1


def test_resource_scope_observes_a_users_threads_together(tmp_path: Path) -> None:
    db = tmp_path / "dev-server.db"
    options = {"scope": "resource", "obscureThreadIds": True, "observation": {"messageTokens": 400}}
    with gateway(tmp_path, options) as server:
        first = [turn(server, "trip", f"t{i}", f"Turn {i}. {FACT}") for i in range(1, 3)]
        # another thread of the same user: the first thread's unobserved messages count here too
        other = turn(server, "chores", "c1", "Also, remind me to water the plants on Friday.")
        assert pending(other) > pending(first[-1])
        later = [turn(server, "chores", f"c{i}", f"Note {i}: the plants are ferns.") for i in range(2, 6)]
        observed = next(r for r in later if parts(r, "observation-end"))
        ends = parts(observed, "observation-end")
        assert {e["threadId"] for e in ends} == {"trip", "chores"}  # one cycle per thread, in one turn
        with sqlite3.connect(db) as conn:
            key, thread_id, log = conn.execute(
                "SELECT lookup_key, thread_id, active_observations FROM mastra_observational_memory"
                " ORDER BY generation_count DESC LIMIT 1").fetchone()
            metadata = dict(conn.execute("SELECT id, metadata FROM threads").fetchall())
        assert key == "resource:ai-chat" and thread_id is None
        assert f'<thread id="{section_id("trip", True)}">' in log and f'<thread id="{section_id("chores", True)}">' in log
        assert '<thread id="trip">' not in log and "Ada Lovelace" in log
        assert json.loads(metadata["trip"])["mastra"]["om"]["lastObservedAt"]  # each thread keeps its own cursor
        # back in the first thread: what was observed there left its window
        back = turn(server, "trip", "t-back", "Where am I going?")
        assert pending(back) < pending(first[-1]) + 100
        assert status(back)["windows"]["active"]["observations"]["tokens"] > 0


def test_buffer_on_idle_buffers_what_a_finished_turn_left_whatever_its_size(tmp_path: Path) -> None:
    db = tmp_path / "dev-server.db"
    options = {"bufferOnIdle": True, "observation": {"messageTokens": 6000, "bufferTokens": 3000}}
    with gateway(tmp_path, options) as server:
        result = turn(server, "quiet", "q1", FACT)
        assert pending(result) < 1500 and not parts(result, "buffering-start")  # far below any interval
        [chunk] = json.loads(buffered(db, "quiet")["buffered_observation_chunks"])
        health = httpx.get(f"{server.url}/health").json()["background"]
    assert "q1" in chunk["messageIds"] and len(chunk["messageIds"]) == 2  # the question and the reply
    assert health["byKind"]["om-buffer"]["done"] == 1


def test_buffering_outlives_a_client_that_hung_up(tmp_path: Path) -> None:
    from tests.support import run_node, user_message

    db = tmp_path / "dev-server.db"
    options = {"observation": {"messageTokens": 6000, "bufferTokens": 100}}
    with gateway(tmp_path, options) as server:
        payload = {"api": f"{server.url}/api/chat", "chatId": "gone", "headers": {}, "trigger": "submit-message",
                   "messages": [user_message("g1", f"{' '.join([FACT] * 6)} Tell me something long [[slow]]")],
                   "body": {"conversationId": "gone"}, "abortAfterChunks": 4}
        result = run_node("chat_client.mjs", payload)
        assert result["aborted"]
        deadline = time.monotonic() + 30
        while not record_row(db, "gone")["buffered_observation_chunks"]:
            assert time.monotonic() < deadline, "the buffered observation never arrived"
            time.sleep(0.05)
    [chunk] = json.loads(record_row(db, "gone")["buffered_observation_chunks"])
    assert chunk["messageIds"] == ["g1"] and "Ada" in chunk["observations"]
