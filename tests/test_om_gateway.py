"""Observational Memory through a live gateway (issue 11), and the module where the real
``ai`` package judges every ``data-om-*`` part the gateway streams.

Small thresholds (300 message tokens, 400 observation tokens, no async buffering) drive a
whole observe -> reflect cycle with the built-in local model as actor, observer and
reflector. The fields are those of docs/observational-memory.md#stream-parts. The record is
read back through a studio on the same data dir with ``@mastra/client-js``.

The tests whose subject is a part's format make their turns with ``judged_turn`` (the SDK's
``DefaultChatTransport`` and its own chunk schema, ``tests/js/chat_client.mjs``):
``data-om-status`` and ``data-om-observation-start`` / ``-end`` (the cycle test),
``data-om-observation-failed`` (the failed observation), ``data-om-buffering-start`` and
``data-om-activation`` (buffered observations, and a buffered reflection, whose
``data-om-buffering-end`` the local reflector usually sends while the turn still streams),
``data-signal`` (a long silence's reminder) and ``data-om-thread-update`` (the observer's
title). Every other OM test, here and in the other modules, reads its turns in Python
(``tests.kit.chat.turn``).
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from dev_server.om.tokens.counting import count_messages
from tests.kit.chat import judged_turn, reply_text, turn
from tests.kit.local_http import local_http
from tests.kit.om import (
    ASYNC_ENV,
    FACT,
    OM_ENV,
    await_buffer,
    om_chunks,
    parts,
    pending,
    record_row,
    settled,
    status,
    stored_messages,
    thread_om,
)
from tests.kit.om_agents import extracting_agent
from tests.kit.servers import running, serve, server_fixture
from tests.kit.studio_ui import run_studio
from tests.kit.traces import wait_for_traces
from tests.support import free_port, run_node, sqlite_rows

START_FIELDS = {"cycleId", "operationType", "startedAt", "tokensToObserve", "recordId", "threadId", "threadIds",
                "config"}
END_FIELDS = {"cycleId", "operationType", "completedAt", "durationMs", "tokensObserved", "observationTokens",
              "recordId", "threadId"}
FAILED_FIELDS = {"cycleId", "operationType", "failedAt", "durationMs", "tokensAttempted", "error", "recordId",
                 "threadId"}
BUFFER_START = {"cycleId", "operationType", "startedAt", "tokensToBuffer", "recordId", "threadId", "threadIds",
                "config"}
BUFFER_END = {"cycleId", "operationType", "completedAt", "durationMs", "tokensBuffered", "bufferedTokens",
              "recordId", "threadId"}
ACTIVATION = {"cycleId", "operationType", "activatedAt", "chunksActivated", "tokensActivated",
              "observationTokens", "messagesActivated", "recordId", "threadId", "generationCount", "config",
              "triggeredBy"}


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("om-data")


gateway = server_fixture("gateway", data="data", env=OM_ENV)


@pytest.fixture(scope="module")
def async_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("om-async")


# buffering in the background every 200 tokens; the studio reads the record with client-js
async_gateway = server_fixture("gateway", data="async_data", env=ASYNC_ENV)
async_studio = server_fixture("studio", data="async_data", after=("async_gateway",), env=ASYNC_ENV)
# every extractor, the observer's title and the working memory (tests.kit.om_agents)
titling = server_fixture("gateway", inprocess=True, settings={"telemetry": False}, agents=(extracting_agent(),))


def test_a_thread_is_observed_then_reflected_and_every_part_passes_the_sdk(gateway: Any, data: Path) -> None:
    results = [judged_turn(gateway, "cycle", f"c{i}", f"Turn {i}. {FACT}") for i in range(1, 9)]
    for result in results:
        statuses = om_chunks(result, "status")
        assert len(statuses) == 1 and statuses[0]["transient"] is True
        status = statuses[0]["data"]
        assert status["stepNumber"] == 0 and status["threadId"] == "cycle" and status["recordId"]
        assert status["windows"]["active"]["messages"]["threshold"] == 300
        assert status["windows"]["active"]["observations"]["threshold"] == 400
        assert set(status["windows"]["buffered"]) == {"observations", "reflection"}
        # Mastra's order: the step's cycle parts, its status, then the step's start-step
        types = [c["type"] for c in result["chunks"]]
        opening = types[:types.index("start-step")]
        assert opening[0] == "start" and opening[-1] == "data-om-status"
        assert all(t.startswith("data-om-observation-") for t in opening[1:-1])
    cycles = [c for r in results for c in om_chunks(r, "observation")]
    assert all(c["transient"] is True for c in cycles)
    observations = [c["data"] for c in cycles if c["data"]["operationType"] == "observation"]
    reflections = [c["data"] for c in cycles if c["data"]["operationType"] == "reflection"]
    assert observations and reflections, [c["type"] for c in cycles]
    starts = [c["data"] for c in cycles if c["type"] == "data-om-observation-start"]
    ends = [c["data"] for c in cycles if c["type"] == "data-om-observation-end"]
    assert all(set(s) >= START_FIELDS for s in starts) and all(set(e) >= END_FIELDS for e in ends)
    assert {s["cycleId"] for s in starts} >= {e["cycleId"] for e in ends}
    first_end = next(e for e in ends if e["operationType"] == "observation")
    assert first_end["tokensObserved"] >= 300 and "Ada Lovelace" in first_end["observations"]
    assert first_end["currentTask"] and first_end["suggestedResponse"]
    assert starts[0]["config"] == {"messageTokens": 300, "observationTokens": 400, "scope": "thread"}

    rows = sqlite_rows(data / "dev-server.db", "SELECT generation_count, origin_type, observation_token_count"
                       " FROM mastra_observational_memory WHERE lookup_key = 'thread:cycle' ORDER BY generation_count")
    assert rows[0][:2] == (0, "initial") and rows[-1][1] == "reflection" and rows[-1][0] >= 1
    # durable copies of the markers ride on the assistant replies; data-om-status never does
    stored = [json.loads(r[0]) for r in sqlite_rows(data / "dev-server.db", "SELECT content FROM messages"
                                                     " WHERE thread_id = 'cycle' AND role = 'assistant'")]
    kinds = {p["type"] for content in stored for p in content["parts"]}
    assert {"data-om-observation-start", "data-om-observation-end"} <= kinds and "data-om-status" not in kinds
    # the per-part token estimates are cached on the stored replies
    texts = [p for content in stored for p in content["parts"] if p["type"] == "text"]
    assert all(p["providerMetadata"]["mastra"]["tokenEstimate"]["source"] == "v7:tokenx" for p in texts)


def test_the_model_gets_the_observations_instead_of_the_observed_messages(gateway: Any) -> None:
    results = [turn(gateway, "recall", f"r{i}", f"Turn {i}. {FACT}") for i in range(1, 6)]
    assert any(om_chunks(r, "observation-end") for r in results)
    answer = turn(gateway, "recall", "r-name", "What is my name?")
    # the raw messages that said it were observed and left the window; the observations say it
    assert "Your name is Ada Lovelace" in reply_text(answer)
    status = om_chunks(answer, "status")[0]["data"]["windows"]["active"]
    assert status["observations"]["tokens"] > 0 and status["messages"]["tokens"] < 300


def test_one_message_over_the_threshold_is_observed_on_its_own_turn(gateway: Any) -> None:
    long_message = " ".join([FACT] * 20)  # ~500 tokens, a first message alone over 300
    first = turn(gateway, "single", "big-1", long_message)
    [end] = [c["data"] for c in om_chunks(first, "observation-end")]
    assert end["tokensObserved"] >= 300 and "Ada Lovelace" in end["observations"]
    # the turn's own input stays in the window: the model still answered it
    assert "Ada Lovelace" in reply_text(first)


def test_a_failed_observation_is_reported_loses_nothing_and_the_turn_answers(gateway: Any, data: Path) -> None:
    for i in range(1, 4):
        judged_turn(gateway, "faulty", f"f{i}", f"Turn {i}. {FACT}")
    result = judged_turn(gateway, "faulty", "f-fail", f"{FACT} [[observer-fail]]")
    failed = [c["data"] for c in om_chunks(result, "observation-failed")]
    assert failed and set(failed[0]) >= FAILED_FIELDS and failed[0]["operationType"] == "observation"
    assert reply_text(result).startswith("[local model]")
    record = sqlite_rows(data / "dev-server.db", "SELECT active_observations, last_observed_at FROM"
                         " mastra_observational_memory WHERE lookup_key = 'thread:faulty'")
    assert record == [("", None)]
    assert sqlite_rows(data / "dev-server.db", "SELECT count(*) FROM messages WHERE thread_id = 'faulty'") == [(8,)]
    degenerate = judged_turn(gateway, "faulty", "f-degenerate", f"{FACT} [[observer-degenerate]]")
    errors = [c["data"]["error"] for c in om_chunks(degenerate, "observation-failed")]
    assert errors and "degenerate" in errors[0]
    # the next turn observes everything, the failed attempts' messages included
    healed = judged_turn(gateway, "faulty", "f-ok", "Thanks, carry on.")
    assert [c["data"]["operationType"] for c in om_chunks(healed, "observation-end")][:1] == ["observation"]


def test_a_reflection_in_prose_is_a_failed_cycle_and_the_log_stays(gateway: Any, data: Path) -> None:
    # the trigger rides in the first user statement into the log; the local reflector then answers prose
    failed: list[dict[str, Any]] = []
    for i in range(1, 11):
        result = turn(gateway, "prose", f"p{i}", f"Turn {i}. {FACT}" + (" [[reflector-prose]]" if i == 1 else ""))
        failed = [c["data"] for c in om_chunks(result, "observation-failed")
                  if c["data"]["operationType"] == "reflection"]
        if failed:
            break
    assert failed, "no reflection was attempted"
    assert all(set(f) >= FAILED_FIELDS and "no observation lines" in f["error"] for f in failed)
    assert "no retry left" in failed[-1]["error"]
    assert not [c for c in om_chunks(result, "observation-end") if c["data"]["operationType"] == "reflection"]
    rows = sqlite_rows(data / "dev-server.db", "SELECT generation_count, active_observations, observation_token_count"
                       " FROM mastra_observational_memory WHERE lookup_key = 'thread:prose'")
    [(generation, log, tokens)] = rows  # no reflection generation was written
    assert generation == 0 and tokens >= 400 and "Ada Lovelace" in log and "[[reflector-prose]]" in log
    assert "I have reviewed these observations" not in log
    # the failure markers are kept on the turn's stored reply
    [stored] = [json.loads(r[0]) for r in sqlite_rows(data / "dev-server.db", "SELECT content FROM messages"
                                                       " WHERE thread_id = 'prose' AND role = 'assistant'"
                                                       " ORDER BY created_at DESC LIMIT 1")]
    kept = [p["data"] for p in stored["parts"] if p["type"] == "data-om-observation-failed"]
    assert [k["cycleId"] for k in kept] == [f["cycleId"] for f in failed]


def test_the_record_survives_a_restart_and_the_studio_reads_it_with_client_js(gateway: Any, data: Path) -> None:
    for i in range(1, 5):
        turn(gateway, "durable", f"d{i}", f"Turn {i}. {FACT}")
    gateway.stop()
    gateway.start()
    gateway.wait_healthy()
    after = turn(gateway, "durable", "d-after", "Where was I going?")
    status = om_chunks(after, "status")[0]["data"]
    assert status["windows"]["active"]["observations"]["tokens"] > 0
    with running("studio", data, OM_ENV) as studio:
        read = run_node("om_client.mjs", {"baseUrl": studio.url, "agentId": "chat-agent",
                                          "resourceId": "chat-agent", "threadId": "durable"})
    assert read["ok"], read.get("error")
    om_config = read["config"]["config"]["observationalMemory"]
    assert om_config["enabled"] is True and om_config["scope"] == "thread"
    assert (om_config["messageTokens"], om_config["observationTokens"]) == (300, 400)
    assert om_config["observationModelRouting"]["local"] is True
    om_status = read["status"]["observationalMemory"]
    assert om_status["enabled"] and om_status["hasRecord"] and om_status["observationTokenCount"] > 0
    record = read["om"]["record"]
    assert record["threadId"] == "durable" and "Ada Lovelace" in record["activeObservations"]
    assert record["isObserving"] is False and record["config"]["observation"]["messageTokens"] == 300
    assert read["om"]["history"][0]["id"] == record["id"] and read["buffer"]["record"]["id"] == record["id"]


@pytest.mark.e2e
def test_the_real_studio_shows_the_observation_marker_of_a_gateway_thread(gateway: Any, data: Path) -> None:
    for i in range(1, 6):
        turn(gateway, "shown", f"s{i}", f"Turn {i}. {FACT}")
    with running("studio", data, OM_ENV) as studio:
        # the Studio renders the durable data-om-observation-end marker as "Observed N→M tokens"
        result = run_studio(studio, threadId="shown", expectThreadText="Observed", sendText="What is my name?")
    assert "Your name is Ada Lovelace" in result["replyText"]


def test_the_observer_call_is_a_span_of_the_turns_trace(start_server: Any) -> None:
    studio_port = free_port()
    studio = start_server("studio", port=studio_port,
                          env={k: v for k, v in OM_ENV.items() if k != "DEV_SERVER_TELEMETRY"})
    gateway = start_server("gateway", env={**OM_ENV, "DEV_SERVER_TELEMETRY": "true",
                                           "DEV_SERVER_STUDIO_PORT": str(studio_port)})
    results = [turn(gateway, "traced", f"t{i}", f"Turn {i}. {FACT}") for i in range(1, 6)]
    observed_at = next(i for i, r in enumerate(results) if om_chunks(r, "observation-end"))
    traces = wait_for_traces(studio, lambda ts: sum(t["threadId"] == "traced" for t in ts) >= observed_at + 1)
    spans = [s for t in traces if t["threadId"] == "traced"
             for s in local_http.get(f"{studio.url}/api/observability/traces/{t['traceId']}").json()["spans"]]
    observer = [s for s in spans if s["name"] == "agent run: 'observational-memory-observer'"]
    assert observer and observer[0]["spanType"] == "agent_run"
    parent = next(s for s in spans if s["spanId"] == observer[0]["parentSpanId"])
    assert parent["name"] == "input processor: observational-memory"
    assert "Ada Lovelace" in observer[0]["output"]["text"] and observer[0]["attributes"]["local"] is True


# -- async buffering, temporal markers, titles (issues 12 and 14) ---------------------------


def test_buffering_runs_at_the_intervals_and_activation_swaps_chunks_in(async_gateway: Any, async_studio: Any,
                                                                         async_data: Path) -> None:
    gateway, studio, data = async_gateway, async_studio, async_data
    db = data / "dev-server.db"
    results, before = [], []
    for i in range(1, 10):
        before.append(await_buffer(studio.url, "async") if i > 1 else None)  # waits for the background observer
        results.append(judged_turn(gateway, "async", f"a{i}", f"Turn {i}. {FACT}"))
    # buffering starts on the first turn whose window crosses bufferTokens (200), long before 600
    first = next(i for i, r in enumerate(results) if parts(r, "buffering-start"))
    assert first == next(i for i, r in enumerate(results) if pending(r) >= 200)
    starts = [p for r in results for p in parts(r, "buffering-start")]
    assert len(starts) >= 3
    assert all(set(s) >= BUFFER_START and s["operationType"] == "observation" for s in starts)
    assert all(s["cycleId"].startswith("buffer-obs-") and s["tokensToBuffer"] >= 100 for s in starts)
    assert status(results[first])["windows"]["buffered"]["observations"]["status"] == "running"
    # the end parts are kept on the replies (the local observer answers after the turn's own stream)
    stored = stored_messages(db, "async")
    ends = [p["data"] for m in stored for p in m.content["parts"] if p["type"] == "data-om-buffering-end"]
    ends += [p for r in results for p in parts(r, "buffering-end")]
    assert ends and all(set(e) >= BUFFER_END for e in ends)
    assert {e["cycleId"] for e in ends} <= {s["cycleId"] for s in starts}
    assert all(m.content.get("metadata", {}).get("mastra", {}).get("sealed") for m in stored[:first * 2])
    # the status reports the buffered window as the record holds it
    index = next(i for i, r in enumerate(before) if r and r["bufferedObservationChunks"])
    windows = status(results[index])["windows"]["buffered"]["observations"]
    assert windows["chunks"] >= len(before[index]["bufferedObservationChunks"]) and windows["observationTokens"] > 0
    # activation: the first turn at the threshold swaps the oldest chunks in, with no model call
    at = next(i for i, r in enumerate(results) if parts(r, "activation"))
    activations = parts(results[at], "activation")
    assert all(set(a) >= ACTIVATION and a["triggeredBy"] == "threshold" and a["chunksActivated"] == 1
               and a["operationType"] == "observation" for a in activations)
    assert not parts(results[at], "observation-start")  # no synchronous observer call
    chunks = before[at]["bufferedObservationChunks"]
    activated = [c for c in chunks if c["cycleId"] in {a["cycleId"] for a in activations}]
    assert activated == chunks[:len(activated)]  # the oldest, in order
    assert [a["tokensActivated"] for a in activations] == [c["messageTokens"] for c in activated]
    # what the model saw: the window at the turn's start minus the activated chunks' messages
    user_at = results_created_at(db, f"a{at + 1}")
    cursor = before[at]["lastObservedAt"]
    window = [m for m in stored_messages(db, "async") if m.created_at <= user_at and (cursor is None
                                                                                     or m.created_at > cursor)]
    taken = {mid for c in activated for mid in c["messageIds"]}
    assert taken and taken <= {m.id for m in window}
    assert pending(results[at]) == count_messages([m for m in window if m.id not in taken])
    # the retention floor (600 * (1 - 0.8) = 120 tokens) stays in the window
    assert pending(results[at]) >= 120
    after = before[at + 1]  # the record after that turn (and its buffering)
    assert "Ada Lovelace" in after["activeObservations"] and after["lastObservedAt"] == activated[-1]["lastObservedAt"]
    assert after["observationTokenCount"] == before[at]["observationTokenCount"] + sum(c["tokenCount"]
                                                                                        for c in activated)
    # the activation markers are kept as Mastra keeps them: on the last assistant message at
    # activation time, the previous turn's reply, after its text; the new reply has none
    replies = [m for m in stored_messages(db, "async") if m.role == "assistant"]
    previous = [m for m in replies if m.created_at < user_at][-1]
    kept = previous.content["parts"]
    assert kept[0]["type"] == "text"
    assert [p["data"]["cycleId"] for p in kept if p["type"] == "data-om-activation"] == [
        a["cycleId"] for a in activations]
    reply = next(m for m in replies if m.created_at > user_at)
    assert not [p for p in reply.content["parts"] if p["type"] == "data-om-activation"]


def results_created_at(db: Path, message_id: str) -> str:
    return sqlite_rows(db, "SELECT created_at FROM messages WHERE id = ?", (message_id,))[0][0]


def test_reflection_is_buffered_then_swapped_in_at_its_threshold(tmp_path: Path) -> None:
    db = tmp_path / "dev-server.db"
    options = {"observation": {"messageTokens": 600, "bufferTokens": 200}, "reflection": {"observationTokens": 500}}
    reflection_parts, windows = [], []
    with serve("gateway", tmp_path, inprocess=True, settings={"telemetry": False, "om_options": options}) as server:
        for i in range(1, 16):
            result = judged_turn(server, "reflect", f"r{i}", f"Turn {i}. {FACT}")
            windows.append(status(result)["windows"]["buffered"]["reflection"])
            reflection_parts += [(kind, p) for kind in ("buffering-start", "buffering-end", "activation")
                                 for p in parts(result, kind) if p["operationType"] == "reflection"]
            settled(db, "reflect")
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


def test_a_long_silence_is_marked_after_the_next_message(tmp_path: Path) -> None:
    db = tmp_path / "dev-server.db"
    options = {"temporalMarkers": True, "observation": {"messageTokens": 250, "bufferTokens": False}}
    with serve("gateway", tmp_path, inprocess=True, settings={"telemetry": False, "om_options": options}) as server:
        judged_turn(server, "gap", "g1", FACT)
        with sqlite3.connect(db) as conn:  # three days pass
            conn.execute("UPDATE messages SET created_at = strftime('%Y-%m-%dT%H:%M:%fZ', created_at, '-3 days')")
        result = judged_turn(server, "gap", "g2", "Hello again, do you remember me?")
        [signal] = [c["data"] for c in result["chunks"] if c["type"] == "data-signal"]
        assert (signal["type"], signal["tagName"]) == ("reactive", "system-reminder")
        assert signal["attributes"]["gapText"] == "3 days later" and signal["attributes"]["precedesMessageId"] == "g2"
        with sqlite3.connect(db) as conn:
            rows = conn.execute("SELECT id, role, type, content FROM messages WHERE thread_id = 'gap'"
                                " ORDER BY created_at, seq").fetchall()
        assert [r[1] for r in rows] == ["user", "assistant", "user", "signal", "assistant"]
        assert rows[2][0] == "g2" and rows[3][0].startswith("__temporal_gap_") and rows[3][2] == "system-reminder"
        assert json.loads(rows[3][3])["parts"] == [{"type": "text", "text": signal["contents"]}]
        # the observer reads it with the rest, as "Signal: ..."
        observed = judged_turn(server, "gap", "g3", f"Once more: {FACT}")
        ends = [p for p in parts(observed, "observation-end") if p["operationType"] == "observation"]
        assert ends and "3 days later — " in ends[0]["observations"]


def test_the_title_is_updated_streamed_and_listed_by_the_studio(titling: Any) -> None:
    server, data = titling, titling.data_dir
    updates = []
    for i in range(1, 12):
        result = judged_turn(server, "titled", f"titled-{i}", f"Alpine hiking plans {i}. {FACT}")
        updates += parts(result, "thread-update")
        if updates:
            break
    [update] = updates
    assert update["threadId"] == "titled" and update["newTitle"].startswith("Alpine hiking plans 1")
    assert update["cycleId"] and update["timestamp"]
    title, _ = thread_om(data, "titled")
    assert title == update["newTitle"]
    with serve("studio", data, inprocess=True, settings={"telemetry": False}) as studio:
        listed = local_http.get(f"{studio.url}/api/memory/threads", params={"resourceId": "ai-chat",
                                                                        "agentId": "chat-agent"}).json()
    assert {t["id"]: t["title"] for t in listed["threads"]}["titled"] == update["newTitle"]
