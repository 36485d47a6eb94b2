"""Issue 14 items 4 and 6 through live apps (real uvicorn in this process, the local model
observing): hooks on turn-sync and async-buffer cycles, a raising hook, a failed
background cycle reported to the end hook, and the Studio's manual ``observe`` /
``reflect`` routes with ``trigger: "manual"``."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from dev_server.agents import chat_agent
from dev_server.memory.memory import MemoryOptions
from dev_server.om.options.models import ModelByInputTokens
from tests.kit.chat import turn
from tests.kit.local_http import local_http
from tests.kit.om import FACT
from tests.kit.servers import InProcessServer, serve
from tests.kit.traces import wait_for_traces

Events = list[tuple[str, dict[str, Any]]]


def hooks_into(events: Events, **override: Callable[..., Any]) -> dict[str, Any]:
    names = ("onObservationStart", "onObservationEnd", "onReflectionStart", "onReflectionEnd", "onBufferingStart",
             "onBufferingEnd")
    hooks: dict[str, Any] = {}
    for name in names:
        async def hook(event: dict[str, Any], name: str = name) -> None:
            events.append((name, event))
        hooks[name] = hook
    return {**hooks, **override}


def live(role: str, data: Path, options: dict[str, Any], hooks: dict[str, Any], *,
         telemetry: bool = False) -> AbstractContextManager[InProcessServer]:
    agent = dataclasses.replace(chat_agent.definition, memory=lambda: MemoryOptions(
        last_messages=10, observational_memory={"hooks": hooks}))
    return serve(role, data, inprocess=True, settings={"telemetry": telemetry, "om_options": options},
                 agents=(agent,))


def observe_once(server: InProcessServer, thread: str) -> None:
    """Turns on ``thread`` until one observes (a small messageTokens)."""
    for i in range(1, 6):
        result = turn(server, thread, f"{thread}-{i}", f"Turn {i}. {FACT}")
        if any(c["type"] == "data-om-observation-end" for c in result["chunks"]):
            return
    raise AssertionError("no observation")


def wait_for(events: Events, predicate: Callable[[str, dict[str, Any]], bool], timeout: float = 30.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        found = [e for n, e in events if predicate(n, e)]
        if found:
            return found[0]
        assert time.monotonic() < deadline, f"no such hook call in {[(n, e.get('trigger')) for n, e in events]}"
        time.sleep(0.05)


def test_turn_sync_cycles_call_the_hooks_and_a_raising_hook_does_not_stop_them(tmp_path: Path) -> None:
    events: Events = []

    def broken(event: dict[str, Any]) -> None:
        raise RuntimeError("a bug in the user's hook")

    options = {"observation": {"messageTokens": 300, "bufferTokens": False}}
    with live("gateway", tmp_path, options, hooks_into(events, onObservationStart=broken)) as server:
        observe_once(server, "sync")
    end = wait_for(events, lambda n, e: n == "onObservationEnd")
    assert end["trigger"] == "turn-sync" and end["threadId"] == "sync" and end["resourceId"]
    assert end["error"] is None and end["usage"]["inputTokens"] > 0 and end["usage"]["outputTokens"] > 0
    assert end["model"] and end["calls"] and end["providerMetadata"]
    assert not any(n == "onBufferingEnd" for n, _ in events)


def test_a_resource_scope_turn_calls_the_observation_hooks(tmp_path: Path) -> None:
    events: Events = []
    options = {"scope": "resource", "observation": {"messageTokens": 300, "bufferTokens": False}}
    with live("gateway", tmp_path, options, hooks_into(events)) as server:
        observe_once(server, "res")
    start = wait_for(events, lambda n, e: n == "onObservationStart")
    end = wait_for(events, lambda n, e: n == "onObservationEnd")
    assert start["trigger"] == end["trigger"] == "turn-sync" and end["threadId"] == "res"
    assert end["error"] is None and end["usage"]["inputTokens"] > 0 and end["calls"]


def test_async_buffer_cycles_call_the_hooks_and_report_a_failure_without_raising(tmp_path: Path) -> None:
    events: Events = []
    options = {"observation": {"messageTokens": 600, "bufferTokens": 200}, "reflection": {"observationTokens": 50000}}
    with live("gateway", tmp_path, options, hooks_into(events)) as server:
        for i in range(1, 8):
            turn(server, "buf", f"buf-{i}", f"Turn {i}. {FACT}")
            if any(n == "onBufferingEnd" for n, _ in events):
                break
        ok = wait_for(events, lambda n, e: n == "onBufferingEnd")
        assert ok["trigger"] == "async-buffer" and ok["operation"] == "observation" and ok["error"] is None
        assert ok["usage"]["outputTokens"] > 0
        assert any(n == "onObservationEnd" and e["trigger"] == "async-buffer" for n, e in events)
        assert any(n == "onBufferingStart" for n, _ in events)
        events.clear()
        for i in range(1, 4):
            result = turn(server, "buf", f"fail-{i}", f"Failing turn {i} [[observer-fail]]. {FACT} {FACT}")
            assert result["ok"]  # the turn answers; the background failure never raises into it
            failed = [e for n, e in events if n == "onBufferingEnd" and e["error"]]
            if failed:
                break
        failed_event = wait_for(events, lambda n, e: n == "onBufferingEnd" and bool(e["error"]))
    assert (failed_event["trigger"] == "async-buffer"
            and "could not reach the model provider" in failed_event["error"].lower())


def test_studio_routes_observe_and_reflect_a_thread_manually(tmp_path: Path) -> None:
    events: Events = []
    options = {"observation": {"messageTokens": 20000, "bufferTokens": False}}
    with live("gateway", tmp_path, options, hooks_into(events)) as server:
        for i in range(1, 3):
            turn(server, "manual", f"manual-{i}", f"Turn {i}. {FACT}")
    assert not events  # far below the threshold: the turns observed nothing
    with live("studio", tmp_path, options, hooks_into(events)) as studio:
        body = {"agentId": chat_agent.definition.id, "threadId": "manual"}
        observed = local_http.post(f"{studio.url}/api/memory/observational-memory/observe",
                                   json=body, timeout=30).json()
        assert observed["observed"] and "Ada Lovelace" in observed["record"]["activeObservations"]
        reflected = local_http.post(f"{studio.url}/api/memory/observational-memory/reflect",
                                    json=body, timeout=30).json()
        assert reflected["reflected"] and reflected["record"]["generationCount"] == 1
        missing = local_http.post(f"{studio.url}/api/memory/observational-memory/observe",
                             json={**body, "threadId": "nope"}, timeout=30)
        assert missing.status_code == 404
    names = [n for n, _ in events]
    assert names == ["onObservationStart", "onObservationEnd", "onReflectionStart", "onReflectionEnd"]
    assert all(e["trigger"] == "manual" for _, e in events)


def test_the_cycles_span_carries_the_model_picked_by_input_tokens(tmp_path: Path) -> None:
    """The observer call's span (read back from the studio's observability store) names the
    model ``ModelByInputTokens`` chose and why: the call's input tokens and its tier."""
    events: Events = []
    # the settings' options replace the agent's (hooks excepted): the model goes there
    options = {"observation": {"messageTokens": 20000, "bufferTokens": False},
               "model": ModelByInputTokens({3000: "local/small", 200000: "local/large"})}
    with live("gateway", tmp_path, options, hooks_into(events)) as server:
        turn(server, "picked", "picked-1", f"Turn 1. {FACT}")
    with live("studio", tmp_path, options, hooks_into(events), telemetry=True) as studio:
        body = {"agentId": chat_agent.definition.id, "threadId": "picked"}
        observed = local_http.post(f"{studio.url}/api/memory/observational-memory/observe",
                                   json=body, timeout=30).json()
        assert observed["observed"]
        traces = wait_for_traces(studio, lambda ts: any(t["threadId"] == "picked" for t in ts))
        trace_id = next(t["traceId"] for t in traces if t["threadId"] == "picked")
        spans = local_http.get(f"{studio.url}/api/observability/traces/{trace_id}", timeout=10).json()["spans"]
    observer = next(s for s in spans if s["name"] == "agent run: 'observational-memory-observer'")
    attributes = observer["attributes"]
    assert attributes["mastraModel"] == "local/small" and attributes["trigger"] == "manual"
    selection = attributes["modelSelection"]
    assert selection["byInputTokens"] is True and 0 < selection["inputTokens"] <= 3000
    assert (selection["candidate"], selection["candidates"]) == (0, 1)
    assert observer["output"]["model"] == "local/small"
    end = next(e for n, e in events if n == "onObservationEnd")
    assert end["model"] == "local/small" and end["trigger"] == "manual"


def test_studio_routes_observe_and_reflect_in_resource_scope(tmp_path: Path) -> None:
    events: Events = []
    options = {"scope": "resource", "observation": {"messageTokens": 20000, "bufferTokens": False}}
    with live("gateway", tmp_path, options, hooks_into(events)) as server:
        turn(server, "res-a", "res-a-1", f"Turn 1. {FACT}")
        turn(server, "res-b", "res-b-1", "Turn 2. I also collect antique maps of Bavaria.")
    assert not events
    with live("studio", tmp_path, options, hooks_into(events)) as studio:
        body = {"agentId": chat_agent.definition.id, "threadId": "res-a"}
        observed = local_http.post(f"{studio.url}/api/memory/observational-memory/observe",
                                   json=body, timeout=30)
        assert observed.status_code == 200, observed.text
        record = observed.json()["record"]
        assert observed.json()["observed"] and record["scope"] == "resource" and record["threadId"] is None
        # the other thread of the resource was observed in the same cycle
        assert '<thread id="res-a">' in record["activeObservations"]
        assert '<thread id="res-b">' in record["activeObservations"]
        reflected = local_http.post(f"{studio.url}/api/memory/observational-memory/reflect",
                               json={**body, "threadId": "res-b"}, timeout=30).json()
        assert reflected["reflected"] and reflected["record"]["generationCount"] == 1
        assert reflected["record"]["scope"] == "resource"
        shown = local_http.get(f"{studio.url}/api/memory/observational-memory",
                          params={"agentId": chat_agent.definition.id, "threadId": "res-b"}, timeout=10).json()
        assert shown["record"]["id"] == reflected["record"]["id"]
        url = f"{studio.url}/api/memory/observational-memory/observe"
        no_thread = local_http.post(url, json={"agentId": chat_agent.definition.id}, timeout=10)
        assert no_thread.status_code == 400 and no_thread.json()["error"] == "Invalid request body"
        assert no_thread.json()["issues"][0]["field"] == "threadId"
        no_agent = local_http.post(url, json={"agentId": "nobody", "threadId": "res-a"}, timeout=10)
        assert no_agent.status_code == 404 and no_agent.json() == {"error": "Agent with id nobody not found"}
    names = [n for n, _ in events]
    assert names == ["onObservationStart", "onObservationEnd", "onReflectionStart", "onReflectionEnd"]
    assert all(e["trigger"] == "manual" and e["threadId"] in ("res-a", "res-b") for _, e in events)
