"""Observational Memory through a live gateway, judged by the real ``ai`` package (issue 11).

Small thresholds (300 message tokens, 400 observation tokens, no async buffering) drive a
whole observe -> reflect cycle with the built-in local model as actor, observer and
reflector. Every ``data-om-*`` chunk passes the SDK's own schema (``chat_client.mjs``); the
fields are those of Mastra's Observational Memory contract 6. The record is read back through a studio on
the same data dir with ``@mastra/client-js``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.kit.servers import running
from tests.kit.traces import wait_for_traces
from tests.support import free_port, run_node, sqlite_rows, user_message

OM_ENV = {"DEV_SERVER_TELEMETRY": "false", "DEV_SERVER_OM_MESSAGE_TOKENS": "300",
          "DEV_SERVER_OM_OBSERVATION_TOKENS": "400", "DEV_SERVER_OM_BUFFER_TOKENS": "false"}
FACT = "My name is Ada Lovelace and I am planning a hiking trip to the Alps with my two kids next summer."
START_FIELDS = {"cycleId", "operationType", "startedAt", "tokensToObserve", "recordId", "threadId", "threadIds", "config"}
END_FIELDS = {"cycleId", "operationType", "completedAt", "durationMs", "tokensObserved", "observationTokens",
              "recordId", "threadId"}
FAILED_FIELDS = {"cycleId", "operationType", "failedAt", "durationMs", "tokensAttempted", "error", "recordId",
                 "threadId"}


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("om-data")


@pytest.fixture(scope="module")
def gateway(data: Path) -> Any:
    with running("gateway", data, OM_ENV) as server:
        yield server


def turn(gateway: Any, thread: str, message_id: str, text: str) -> dict[str, Any]:
    payload = {"api": f"{gateway.url}/api/chat", "messages": [user_message(message_id, text)],
               "body": {"conversationId": thread}, "headers": {}, "trigger": "submit-message", "chatId": thread}
    result = run_node("chat_client.mjs", payload)
    assert result["ok"], result["error"]
    return result


def om_chunks(result: dict[str, Any], kind: str = "") -> list[dict[str, Any]]:
    return [c for c in result["chunks"] if c["type"].startswith(f"data-om-{kind}")]


def reply_text(result: dict[str, Any]) -> str:
    return "".join(p.get("text", "") for p in result["message"]["parts"] if p["type"] == "text")


def test_a_thread_is_observed_then_reflected_and_every_part_passes_the_sdk(gateway: Any, data: Path) -> None:
    results = [turn(gateway, "cycle", f"c{i}", f"Turn {i}. {FACT}") for i in range(1, 9)]
    for index, result in enumerate(results):
        statuses = om_chunks(result, "status")
        assert len(statuses) == 1 and statuses[0]["transient"] is True
        status = statuses[0]["data"]
        assert status["stepNumber"] == 0 and status["threadId"] == "cycle" and status["recordId"]
        assert status["windows"]["active"]["messages"]["threshold"] == 300
        assert status["windows"]["active"]["observations"]["threshold"] == 400
        assert set(status["windows"]["buffered"]) == {"observations", "reflection"}
        assert [c["type"] for c in result["chunks"][:2]] == ["start", "start-step"]
    cycles = [c for r in results for c in om_chunks(r, "observation")]
    assert all(c["transient"] is True for c in cycles)
    observations = [c["data"] for c in cycles if c["data"]["operationType"] == "observation"]
    reflections = [c["data"] for c in cycles if c["data"]["operationType"] == "reflection"]
    assert observations and reflections, [c["type"] for c in cycles]
    starts = [c["data"] for c in cycles if c["type"] == "data-om-observation-start"]
    ends = [c["data"] for c in cycles if c["type"] == "data-om-observation-end"]
    assert all(START_FIELDS <= set(s) for s in starts) and all(END_FIELDS <= set(e) for e in ends)
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
        turn(gateway, "faulty", f"f{i}", f"Turn {i}. {FACT}")
    result = turn(gateway, "faulty", "f-fail", f"{FACT} [[observer-fail]]")
    failed = [c["data"] for c in om_chunks(result, "observation-failed")]
    assert failed and FAILED_FIELDS <= set(failed[0]) and failed[0]["operationType"] == "observation"
    assert reply_text(result).startswith("[local model]")
    record = sqlite_rows(data / "dev-server.db", "SELECT active_observations, last_observed_at FROM"
                         " mastra_observational_memory WHERE lookup_key = 'thread:faulty'")
    assert record == [("", None)]
    assert sqlite_rows(data / "dev-server.db", "SELECT count(*) FROM messages WHERE thread_id = 'faulty'") == [(8,)]
    degenerate = turn(gateway, "faulty", "f-degenerate", f"{FACT} [[observer-degenerate]]")
    errors = [c["data"]["error"] for c in om_chunks(degenerate, "observation-failed")]
    assert errors and "degenerate" in errors[0]
    # the next turn observes everything, the failed attempts' messages included
    healed = turn(gateway, "faulty", "f-ok", "Thanks, carry on.")
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
    assert all(FAILED_FIELDS <= set(f) and "no observation lines" in f["error"] for f in failed)
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


def test_the_real_studio_shows_the_observation_marker_of_a_gateway_thread(gateway: Any, data: Path) -> None:
    from tests.test_studio_ui import run_studio

    for i in range(1, 6):
        turn(gateway, "shown", f"s{i}", f"Turn {i}. {FACT}")
    with running("studio", data, OM_ENV) as studio:
        # the Studio renders the durable data-om-observation-end marker as "Observed N→M tokens"
        result = run_studio(studio, threadId="shown", expectThreadText="Observed", sendText="What is my name?")
    assert "Your name is Ada Lovelace" in result["replyText"]


def test_the_observer_call_is_a_span_of_the_turns_trace(start_server: Any) -> None:
    studio_port = free_port()
    studio = start_server("studio", port=studio_port, env={k: v for k, v in OM_ENV.items() if k != "DEV_SERVER_TELEMETRY"})
    gateway = start_server("gateway", env={**OM_ENV, "DEV_SERVER_TELEMETRY": "true",
                                           "DEV_SERVER_STUDIO_PORT": str(studio_port)})
    results = [turn(gateway, "traced", f"t{i}", f"Turn {i}. {FACT}") for i in range(1, 6)]
    observed_at = next(i for i, r in enumerate(results) if om_chunks(r, "observation-end"))
    traces = wait_for_traces(studio, lambda ts: sum(t["threadId"] == "traced" for t in ts) >= observed_at + 1)
    spans = [s for t in traces if t["threadId"] == "traced"
             for s in httpx.get(f"{studio.url}/api/observability/traces/{t['traceId']}").json()["spans"]]
    observer = [s for s in spans if s["name"] == "agent run: 'observational-memory-observer'"]
    assert observer and observer[0]["spanType"] == "agent_run"
    parent = next(s for s in spans if s["spanId"] == observer[0]["parentSpanId"])
    assert parent["name"] == "input processor: observational-memory"
    assert "Ada Lovelace" in observer[0]["output"]["text"] and observer[0]["attributes"]["local"] is True
