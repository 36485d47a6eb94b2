"""No tool call stalls its process, and no tool result is a 500 or a lost reply (issue 25, items 2 and 3).

Real processes over HTTP: a studio and a gateway (``python -m dev_server``, one worker each, the
built-in local model) on one data directory. Every built-in server tool, enumerated from the
agent registry so a new one is covered without editing this file, is called with its worst
inputs, over and over from two threads, on the Studio's execute route and through chats
(``use the <tool> tool: <input>``, the local model's trigger); meanwhile ``/health`` of the
same process is probed. The load pauses 10 ms between calls: it is there to run the tools,
not to keep the loop busy with requests (three agent turns back to back keep it busy enough,
worst inputs or not, to queue a /health past 100 ms on this 2-core machine). The issue sets the bound: every probe of a
window answers within
100 ms (a window's max is what counts). A /health alone takes a few ms, but on a machine
shared with other work a process sometimes waits longer than that for a core, load or not
(spikes of 40-60 ms were seen on an idle server), so a window over the bound is measured
again, up to six times: a tool that blocks the loop fails every window (before the fix
one ``(((9**99)**99)**99)**99`` froze the process for more than 40 s), a passing spike
does not fail the test. The bound is the issue's 100 ms on top of what ``/health`` takes on
the same process with no tool running, measured in the same test just before: the full
suite runs on several processes of a 2-core machine, and the waits for a core that it causes
are the machine's, not the loop's.

Results JSON cannot carry (an integer over the 4,300 digits Python writes out, infinity) and
non-real results are a tool error: a 422 on the execute route, a ``tool-output-error`` in a chat
whose reply is then stored, checked in the SQLite file.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from dev_server.agents.agent_tools import AskInput
from dev_server.agents.registry import DEFINITIONS
from dev_server.kernel.tools import Tool
from tests.kit.local_http import local_http
from tests.kit.servers import running
from tests.support import sqlite_rows, user_message, wait_models_ready

HEALTH_BOUND_S = 0.1  # the bound for /health while tools run
PROBES = 10
WINDOWS = 6
LOAD_THREADS = 2
LOAD_PAUSE_S = 0.01  # between two loads of a thread: the load itself must not keep the loop 100% busy
CALL_TIMEOUT_S = 15.0

WORST_EXPRESSIONS = (
    "(((9**99)**99)**99)**99",
    "9**9**9**9",
    "((((((((2**99)**99)**99)**99)**99)**99)**99)**99)",
    "99999999999**99*99999999999**99*99999999999**99*99999999999**99*99999999999**99",
    "(10**100)**44",  # an integer over 4,300 digits
    "1e308*10",  # overflows to infinity
    "1e999",  # infinity as a literal
    "(-8)**0.5",  # not a real number
)
UNREPRESENTABLE = ("(10**100)**44", "1e308*10", "1e999", "(-8)**0.5")
HUGE_LITERAL = "9" * 5000  # an argument Python's JSON cannot read back as an integer


def builtin_tools() -> list[tuple[str, Tool]]:
    return [(definition.id, tool) for definition in DEFINITIONS for tool in definition.tools if not tool.client]


def maximal_input(schema: dict[str, Any]) -> dict[str, Any]:
    """The largest input a JSON schema allows, for a tool this file has no worst inputs for."""
    made: dict[str, Any] = {}
    for name, spec in (schema.get("properties") or {}).items():
        kind = spec.get("type")
        made[name] = ("9" * min(spec.get("maxLength", 10_000), 10_000) if kind == "string"
                      else 10**18 if kind == "integer" else 1e308 if kind == "number" else True if kind == "boolean"
                      else spec.get("default"))
    return made


def worst_inputs(tool: Tool) -> list[dict[str, Any]]:
    if tool.name == "calculator":
        return [{"expression": expression} for expression in WORST_EXPRESSIONS]
    if tool.input_model is AskInput:  # another agent's turn, which calls the calculator
        return [{"question": f"use the calculator tool: {expression}"} for expression in WORST_EXPRESSIONS[:3]]
    return [maximal_input(tool.json_schema())]


def chat_text(tool: Tool, data: dict[str, Any]) -> str:
    """What makes the local model call ``tool`` with ``data`` (``dev_server.llm.local_model``)."""
    schema = tool.json_schema()
    required = schema.get("required") or []
    if list(data) == required and len(required) == 1 and schema["properties"][required[0]].get("type") == "string":
        return f"use the {tool.name} tool: {data[required[0]]}"
    return f"call {tool.name} with {json.dumps(data)}"


TOOL_IDS = [f"{agent}:{tool.name}" for agent, tool in builtin_tools()]


@pytest.fixture(scope="module")
def servers(tmp_path_factory) -> Iterator[tuple[str, str, Path]]:
    data = tmp_path_factory.mktemp("tools-off-loop")
    with running("studio", data) as studio, \
            running("gateway", data, {"DEV_SERVER_STUDIO_URL": studio.url}) as gateway:
        wait_models_ready(studio)
        wait_models_ready(gateway)  # a chat waits for the warm-up: the probes are to time the tools
        yield studio.url, gateway.url, data / "dev-server.db"


def idle_health(url: str, probes: int = 3 * PROBES) -> float:
    """The slowest of ``probes`` /health calls with nothing else running on the process."""
    slowest = 0.0
    with httpx.Client(timeout=5.0) as prober:
        prober.get(f"{url}/health")
        for _ in range(probes):
            time.sleep(0.02)
            started = time.perf_counter()
            prober.get(f"{url}/health")
            slowest = max(slowest, time.perf_counter() - started)
    return slowest


def probe_health_during(url: str, load: Callable[[httpx.Client, int], None], bound: float = HEALTH_BOUND_S
                        ) -> tuple[list[float], int, list[BaseException]]:
    """Run ``load`` over and over in ``LOAD_THREADS`` threads while probing ``url``/health in
    windows of at least ``PROBES`` probes, each lasting until every thread did two more loads (a
    chat takes longer than the probes: a window covers its tool calls too). Returns the slowest
    probe of each window (inf for one that timed out; windows stop at the first within the
    bound, at most ``WINDOWS``), the loads done and the loads that failed."""
    stop = threading.Event()
    done: list[int] = []
    failures: list[BaseException] = []

    def loader(index: int) -> None:
        with httpx.Client(timeout=CALL_TIMEOUT_S) as client:
            turn = 0
            while not stop.is_set():
                try:
                    load(client, index * 10_000 + turn)
                except BaseException as exc:  # reported after the probes
                    failures.append(exc)
                    return
                turn += 1
                done.append(1)
                stop.wait(LOAD_PAUSE_S)

    windows: list[float] = []
    with httpx.Client(timeout=5.0) as prober:
        assert prober.get(f"{url}/health").status_code == 200  # connected (kept alive) before the load starts
        threads = [threading.Thread(target=loader, args=(i,), daemon=True) for i in range(LOAD_THREADS)]
        for thread in threads:
            thread.start()
        while len(windows) < WINDOWS and not (windows and windows[-1] < bound) and not failures:
            slowest, probes, loads, deadline = 0.0, 0, len(done), time.monotonic() + CALL_TIMEOUT_S
            while (probes < PROBES or len(done) < loads + 2 * LOAD_THREADS) and time.monotonic() < deadline:
                time.sleep(0.02)
                started = time.perf_counter()
                try:
                    assert prober.get(f"{url}/health").status_code == 200
                except httpx.TimeoutException:
                    slowest = float("inf")
                    break
                slowest, probes = max(slowest, time.perf_counter() - started), probes + 1
                if failures:
                    break
            windows.append(slowest)
    stop.set()
    for thread in threads:
        thread.join(CALL_TIMEOUT_S + 5)
    return windows, len(done), failures


def read_chat(client: httpx.Client, gateway: str, agent: str, conversation: str, text: str) -> list[dict]:
    body = {"id": conversation, "conversationId": conversation, "agentId": agent, "trigger": "submit-message",
            "messages": [user_message(f"{conversation}-u", text)]}
    with client.stream("POST", f"{gateway}/api/chat", json=body) as response:
        assert response.status_code == 200, response.read()
        lines = [line for line in response.iter_lines() if line.startswith("data: ")]
    assert lines[-1] == "data: [DONE]", lines[-3:]
    return [json.loads(line[len("data: "):]) for line in lines[:-1]]


@pytest.mark.parametrize(("agent", "tool"), builtin_tools(), ids=TOOL_IDS)
def test_health_answers_at_once_while_the_execute_route_runs_a_tools_worst_inputs(servers, agent: str, tool: Tool):
    studio, _, _ = servers
    inputs = worst_inputs(tool)

    def execute(client: httpx.Client, turn: int) -> None:
        response = client.post(f"{studio}/api/agents/{agent}/tools/{tool.name}/execute",
                               json={"data": inputs[turn % len(inputs)]})
        assert response.status_code < 500, response.text

    bound = HEALTH_BOUND_S + idle_health(studio)
    windows, calls, failures = probe_health_during(studio, execute, bound)
    assert min(windows) < bound, f"/health took up to {windows} s (bound {bound:.3f} s) while {tool.name} ran"
    assert calls >= 1 and not failures, failures


@pytest.mark.parametrize(("agent", "tool"), builtin_tools(), ids=TOOL_IDS)
def test_health_answers_at_once_while_chats_call_a_tool_with_its_worst_inputs(servers, agent: str, tool: Tool):
    _, gateway, _ = servers
    inputs = worst_inputs(tool)

    def chat(client: httpx.Client, turn: int) -> None:
        chunks = read_chat(client, gateway, agent, f"worst-{agent}-{tool.name}-{turn}",
                           chat_text(tool, inputs[turn % len(inputs)]))
        assert chunks[-1]["type"] == "finish", chunks[-3:]
        assert any(c["type"].startswith("tool-output-") for c in chunks), chunks

    bound = HEALTH_BOUND_S + idle_health(gateway)
    windows, turns, failures = probe_health_during(gateway, chat, bound)
    assert min(windows) < bound, f"/health took up to {windows} s (bound {bound:.3f} s) while chats called {tool.name}"
    assert turns >= 1 and not failures, failures


# -- results JSON cannot carry: a tool error, never a 500 or a lost reply -------------------

@pytest.mark.parametrize("expression", UNREPRESENTABLE)
def test_an_unrepresentable_result_on_the_execute_route_is_a_422(servers, expression: str):
    studio, _, _ = servers
    for path in ("/api/tools/calculator/execute", "/api/agents/chat-agent/tools/calculator/execute"):
        response = local_http.post(f"{studio}{path}", json={"data": {"expression": expression}}, timeout=30)
        assert response.status_code == 422, response.text
        assert response.json()["code"] == "TOOL_FAILED" and response.json()["error"]


@pytest.mark.parametrize("text", [f"use the calculator tool: {e}" for e in UNREPRESENTABLE]
                         + [f'call calculator with {{"expression": {HUGE_LITERAL}}}'],
                         ids=[*UNREPRESENTABLE, "5000-digit argument"])
def test_a_chat_whose_tool_result_is_unrepresentable_completes_and_is_stored(servers, text: str):
    _, gateway, db = servers
    conversation = f"unrepresentable-{abs(hash(text))}"
    with httpx.Client(timeout=30) as client:
        chunks = read_chat(client, gateway, "chat-agent", conversation, text)
    kinds = [c["type"] for c in chunks]
    assert "tool-output-error" in kinds and kinds[-1] == "finish" and "error" not in kinds, kinds
    rows = sqlite_rows(db, "SELECT content FROM messages WHERE thread_id = ? AND role = 'assistant'", (conversation,))
    assert len(rows) == 1, "the reply was not stored"
    parts = json.loads(rows[0][0])["parts"]
    [invocation] = [p["toolInvocation"] for p in parts if p["type"] == "tool-invocation"]
    assert invocation["isError"] is True and invocation["result"]
    assert any(p["type"] == "text" for p in parts)
