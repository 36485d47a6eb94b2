"""Observational Memory's triggers and budgets through a live gateway (real uvicorn, in this
process so its clock can be moved; issue 12): idle and provider-change activation,
the shared token budget, and the background work's counts in ``/health``. Buffered
reflection and temporal markers are tested in ``tests/test_om_gateway.py``, where the real
``ai`` package judges their parts."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
import time
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from dev_server.agents import chat_agent
from dev_server.agents.registry import DEFINITIONS
from dev_server.kernel.clock import SYSTEM_CLOCK, Clock, ShiftedClock
from dev_server.om.engine.resource import section_id
from tests.kit.builders import user_message
from tests.kit.chat import chat_turn, turn
from tests.kit.local_http import background_idle
from tests.kit.om import FACT, parts, pending, record_row, settled, status
from tests.kit.servers import InProcessServer, serve

BUFFERED = {"observation": {"messageTokens": 600, "bufferTokens": 200}, "reflection": {"observationTokens": 5000}}


def gateway(data: Path, options: dict[str, Any], agents: Any = DEFINITIONS, clock: Clock = SYSTEM_CLOCK
            ) -> AbstractContextManager[InProcessServer]:
    return serve("gateway", data, inprocess=True, settings={"telemetry": False, "om_options": options}, agents=agents,
                 clock=clock)


def chat_until_chunks(server: InProcessServer, db: Path, thread: str) -> list[dict[str, Any]]:
    results = []
    for i in range(1, 8):
        results.append(turn(server, thread, f"{thread}-{i}", f"Turn {i}. {FACT}"))
        if settled(db, thread)["buffered_observation_chunks"] and pending(results[-1]) >= 300:
            return results
    raise AssertionError("no chunk was buffered")


def test_an_idle_thread_activates_its_chunks_when_the_cache_would_be_cold(tmp_path: Path) -> None:
    db = tmp_path / "dev-server.db"
    clock = ShiftedClock()
    with gateway(tmp_path, {**BUFFERED, "activateAfterIdle": "5m"}, clock=clock) as server:
        results = chat_until_chunks(server, db, "idle")
        assert not any(parts(r, "activation") for r in results)  # below the threshold: nothing yet
        chunks = settled(db, "idle")["buffered_observation_chunks"]
        clock.advance(minutes=6)
        result = turn(server, "idle", "idle-back", "I am back. What was I planning?")
    activations = parts(result, "activation")
    assert activations and all(a["triggeredBy"] == "ttl" for a in activations)
    assert all(a["ttlExpiredMs"] >= 300_000 and a["config"]["activateAfterIdle"] == 300_000 and a["lastActivityAt"]
               for a in activations)
    assert pending(result) < pending(results[-1])  # the activated messages left the window, below the threshold
    assert len(activations) <= len(chunks)


def test_a_new_model_activates_the_chunks_its_cache_never_saw(tmp_path: Path) -> None:
    db = tmp_path / "dev-server.db"
    options = {**BUFFERED, "activateOnProviderChange": True, "activateAfterIdle": "auto"}
    with gateway(tmp_path, options) as server:
        chat_until_chunks(server, db, "switch")
        same = turn(server, "switch", "switch-same", "Still here.")
        assert not any(a["triggeredBy"] == "provider_change" for a in parts(same, "activation"))
        settled(db, "switch")
    other = dataclasses.replace(chat_agent.definition, model="anthropic/claude-sonnet-4-5")
    with gateway(tmp_path, options, agents=(other,)) as server:  # a restart with the agent on another provider
        result = turn(server, "switch", "switch-new", "Hello from the new model.")
    activations = parts(result, "activation")
    assert activations and activations[0]["triggeredBy"] == "provider_change"
    assert (activations[0]["previousModel"], activations[0]["currentModel"]) == (
        "openai/gpt-4o-mini", "anthropic/claude-sonnet-4-5")
    # its marker carries the activateAfterIdle in force, as Mastra's markers do
    assert all(a["config"]["activateAfterIdle"] == "auto" for a in activations)


def test_a_shared_budget_gives_messages_what_observations_do_not_use(tmp_path: Path) -> None:
    options = {"shareTokenBudget": True, "observation": {"messageTokens": 300, "bufferTokens": False},
               "reflection": {"observationTokens": 400}}
    with gateway(tmp_path, options) as server:
        results = [turn(server, "shared", f"s{i}", f"Turn {i}. {FACT}") for i in range(1, 9)]
        work = background_idle(server.url)  # the title job may still be at work after the last turn
    windows = [status(r)["windows"]["active"] for r in results]
    assert windows[0]["messages"]["threshold"] == 700  # 300 + 400, nothing observed yet
    observed = next(i for i, r in enumerate(results) if parts(r, "observation-end"))
    assert pending(results[observed - 1]) < 700 <= pending(results[observed - 1]) + 200
    after = windows[observed]
    assert after["messages"]["threshold"] == max(700 - after["observations"]["tokens"], 300)
    assert after["observations"]["threshold"] == max(700 - after["messages"]["threshold"], 1000)
    assert work["done"] >= 1 and work["failed"] == 0  # the title job ran there
    # a turn that read the thread before the first title job wrote its title queues a second
    # one, which finds the title and returns (no model call)
    assert work["byKind"]["title"]["done"] >= 1


def test_resource_scope_observes_a_users_threads_together(tmp_path: Path) -> None:
    db = tmp_path / "dev-server.db"
    options = {"scope": "resource", "obscureThreadIds": True, "observation": {"messageTokens": 600}}
    with gateway(tmp_path, options) as server:
        first = [turn(server, "trip", f"t{i}", f"Turn {i}. {FACT}") for i in range(1, 3)]
        # another thread of the same user: the first thread's unobserved messages count here too
        # (twice, as Mastra counts them: D40)
        other = turn(server, "chores", "c1", "Also, remind me to water the plants on Friday.")
        assert pending(other) > pending(first[-1])
        observed = None
        for i in range(2, 8):  # until the window (this thread's and, twice, the other's) reaches the threshold
            result = turn(server, "chores", f"c{i}", f"Note {i}: the plants are ferns.")
            if parts(result, "observation-end"):
                observed = result
                break
        assert observed is not None
        ends = parts(observed, "observation-end")
        assert {e["threadId"] for e in ends} == {"trip", "chores"}  # one cycle per thread, in one turn
        with sqlite3.connect(db) as conn:
            key, thread_id, log = conn.execute(
                "SELECT lookup_key, thread_id, active_observations FROM mastra_observational_memory"
                " ORDER BY generation_count DESC LIMIT 1").fetchone()
            metadata = dict(conn.execute("SELECT id, metadata FROM threads").fetchall())
        assert key == "resource:ai-chat" and thread_id is None
        assert (f'<thread id="{section_id("trip", True)}">' in log
                and f'<thread id="{section_id("chores", True)}">' in log)
        assert '<thread id="trip">' not in log and "Ada Lovelace" in log
        assert json.loads(metadata["trip"])["mastra"]["om"]["lastObservedAt"]  # each thread keeps its own cursor
        # back in the first thread: what was observed there left its window
        back = turn(server, "trip", "t-back", "Where am I going?")
        assert pending(back) < pending(first[-1]) + 100
        assert status(back)["windows"]["active"]["observations"]["tokens"] > 0


def test_buffer_on_idle_buffers_what_a_finished_turn_left_whatever_its_size(tmp_path: Path) -> None:
    db = tmp_path / "dev-server.db"
    # Mastra's place for it (the top-level key is read as a fallback)
    options = {"observation": {"messageTokens": 6000, "bufferTokens": 3000, "bufferOnIdle": True}}
    with gateway(tmp_path, options) as server:
        result = turn(server, "quiet", "q1", FACT)
        assert pending(result) < 1500 and not parts(result, "buffering-start")  # far below any interval
        [chunk] = json.loads(settled(db, "quiet")["buffered_observation_chunks"])
        health = background_idle(server.url)
    assert "q1" in chunk["messageIds"] and len(chunk["messageIds"]) == 2  # the question and the reply
    assert health["byKind"]["om-buffer"]["done"] == 1


def test_buffering_outlives_a_client_that_hung_up(tmp_path: Path) -> None:
    db = tmp_path / "dev-server.db"
    options = {"observation": {"messageTokens": 6000, "bufferTokens": 100}}
    with gateway(tmp_path, options) as server:
        result = chat_turn(server, [user_message("g1", f"{' '.join([FACT] * 6)} Tell me something long [[slow]]")],
                           body={"conversationId": "gone"}, chat_id="gone", abort_after=4)
        assert result["aborted"]
        deadline = time.monotonic() + 30
        while not record_row(db, "gone")["buffered_observation_chunks"]:
            assert time.monotonic() < deadline, "the buffered observation never arrived"
            time.sleep(0.05)
    [chunk] = json.loads(record_row(db, "gone")["buffered_observation_chunks"])
    assert chunk["messageIds"] == ["g1"] and "Ada" in chunk["observations"]
