"""The orchestrator orchestrates: agent as tool, one trace, nothing stored by the sub-agent.

A real studio process (its own spans go to its own DuckDB) with the built-in local model:
``use the ask_chat_agent tool: <question>`` makes the orchestrator call ``ask_chat_agent``,
which runs ``chat-agent`` without a thread; its run is read back through the studio's
observability API as a child of the orchestrator's ``tool_call`` span.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from dev_server.agents.agent_tools import ask_agent_tool
from dev_server.kernel.tools import ToolContext, execute
from tests.kit.local_http import local_http
from tests.kit.servers import server_fixture
from tests.support import sqlite_rows

QUERY = "/api/observability/traces/query"


studio = server_fixture("studio", scope="function", data="data_dir")


def stream_orchestrator(studio, text: str) -> list[dict]:
    chunks = []
    with local_http.stream("POST", f"{studio.url}/api/agents/orchestrator-agent/stream", timeout=60,
                      json={"messages": [{"role": "user", "content": text}]}) as response:
        assert response.status_code == 200
        for line in response.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                chunks.append(json.loads(line[len("data: "):]))
    return chunks


def trace_of(studio, agent_id: str, timeout: float = 45.0) -> list[dict]:
    """The spans of the one trace whose root is ``agent_id``'s run, once all of it arrived."""
    where = {"op": "eq", "left": {"path": "entityId"}, "right": {"literal": agent_id}}
    deadline = time.monotonic() + timeout
    spans: list[dict] = []
    while time.monotonic() < deadline:
        traces = local_http.post(f"{studio.url}{QUERY}", json={"where": where}, timeout=10).json()["traces"]
        if traces:
            [trace] = traces
            spans = local_http.get(f"{studio.url}/api/observability/traces/{trace['traceId']}").json()["spans"]
            if sum(s["spanType"] == "agent_run" for s in spans) == 2 and all(s.get("endedAt") for s in spans):
                return spans
        time.sleep(0.25)
    raise AssertionError(f"the orchestrator's trace never completed: {spans}")


def chain(spans: list[dict], start: dict, types: list[str]) -> list[dict]:
    """Follow child spans of ``types``, one level each, from ``start``."""
    path, node = [start], start
    for span_type in types:
        children = [s for s in spans if s["parentSpanId"] == node["spanId"] and s["spanType"] == span_type]
        assert children, f"no {span_type} under {node['name']}: {[(s['name'], s['parentSpanId']) for s in spans]}"
        node = children[0]
        path.append(node)
    return path


def test_the_orchestrator_asks_chat_agent_and_the_whole_tree_is_one_trace(studio, data_dir: Path):
    chunks = stream_orchestrator(studio, "use the ask_chat_agent tool: use the calculator tool: 6 * 7")
    results = [c for c in chunks if c["type"] == "tool-result"]
    assert [r["payload"]["toolName"] for r in results] == ["ask_chat_agent"]
    answer = results[0]["payload"]["result"]
    assert answer.startswith("[local model] The calculator tool returned:") and '"result": 42' in answer
    text = "".join(c["payload"]["text"] for c in chunks if c["type"] == "text-delta")
    assert text.startswith("[local model] The ask_chat_agent tool returned:")

    spans = trace_of(studio, "orchestrator-agent")
    assert len({s["traceId"] for s in spans}) == 1
    [root] = [s for s in spans if s["parentSpanId"] is None]
    assert root["name"] == "agent run: 'orchestrator-agent'"
    path = chain(spans, root, ["model_generation", "model_step", "tool_call", "agent_run",
                               "model_generation", "model_step", "tool_call"])
    ask, sub_run, calculator = path[3], path[4], path[7]
    assert ask["name"] == "tool: 'ask_chat_agent'" and ask["output"] == answer
    assert sub_run["name"] == "agent run: 'chat-agent'" and sub_run["entityId"] == "chat-agent"
    assert sub_run["input"] == "use the calculator tool: 6 * 7" and sub_run["output"]["text"] == answer
    assert calculator["name"] == "tool: 'calculator'" and calculator["output"]["result"] == 42
    assert not any(s.get("threadId") for s in spans)
    # neither run stores anything: no (empty, 0 ms) memory spans (issue 30)
    assert [s["name"] for s in spans if s["spanType"] == "memory_operation"] == []
    # the sub-agent's run is no trace of its own: chat-agent appears only inside the orchestrator's
    chat_rooted = {"op": "eq", "left": {"path": "name"}, "right": {"literal": "agent run: 'chat-agent'"}}
    assert local_http.post(f"{studio.url}{QUERY}", json={"where": chat_rooted}).json()["traces"] == []

    db = data_dir / "dev-server.db"
    assert sqlite_rows(db, "SELECT count(*) FROM threads") == [(0,)]
    assert sqlite_rows(db, "SELECT count(*) FROM messages") == [(0,)]


def test_the_orchestrator_can_ask_the_docs_agent(studio):
    chunks = stream_orchestrator(studio, "use the ask_docs_agent tool: where is the install guide?")
    [result] = [c for c in chunks if c["type"] == "tool-result"]
    assert result["payload"]["toolName"] == "ask_docs_agent"
    assert result["payload"]["result"].startswith('[local model] You said: "where is the install guide?"')


def test_the_execute_route_runs_an_ask_tool_under_its_own_span(studio, data_dir: Path):
    response = local_http.post(f"{studio.url}/api/agents/orchestrator-agent/tools/ask_chat_agent/execute", timeout=30,
                          json={"data": {"question": "use the calculator tool: 2 + 3"}})
    assert response.status_code == 200, response.text
    assert response.json().startswith("[local model] The calculator tool returned:")
    spans = trace_of_tool(studio, "ask_chat_agent")
    [root] = [s for s in spans if s["parentSpanId"] is None]
    assert root["spanType"] == "tool_call"
    chain(spans, root, ["agent_run", "model_generation", "model_step", "tool_call"])
    assert sqlite_rows(data_dir / "dev-server.db", "SELECT count(*) FROM messages") == [(0,)]


def trace_of_tool(studio, tool: str, timeout: float = 45.0) -> list[dict]:
    name = {"op": "eq", "left": {"path": "name"}, "right": {"literal": f"tool: '{tool}'"}}
    deadline = time.monotonic() + timeout
    spans: list[dict] = []
    while time.monotonic() < deadline:
        traces = local_http.post(f"{studio.url}{QUERY}", json={"where": name}, timeout=10).json()["traces"]
        if traces:
            spans = local_http.get(f"{studio.url}/api/observability/traces/{traces[0]['traceId']}").json()["spans"]
            if any(s["spanType"] == "agent_run" for s in spans) and all(s.get("endedAt") for s in spans):
                return spans
        time.sleep(0.25)
    raise AssertionError(f"the tool's trace never completed: {spans}")


@pytest.mark.anyio
async def test_an_ask_tool_outside_a_turn_is_a_tool_error_not_a_crash() -> None:
    tool = ask_agent_tool("chat-agent", "Ask the chat agent.")
    outcome = await execute({tool.name: tool}, tool.name, json.dumps({"question": "hi"}),
                            ToolContext(call_id="c1", agent_id="x", run_id="r1"))
    assert outcome.error == "RuntimeError: ask_chat_agent runs only inside an agent's turn"


@pytest.mark.anyio
async def test_agents_asking_each_other_in_a_cycle_stop_at_the_depth_limit(tmp_path: Path) -> None:
    from dev_server.agents.definition import AgentDefinition
    from dev_server.agents.registry import AgentRegistry
    from dev_server.agents.runner import MAX_ASK_DEPTH, TurnRunner
    from dev_server.llm.client import LiteLLMClient
    from dev_server.storage.conversations import ConversationStore

    loopy = AgentDefinition(id="loopy", name="Loopy", instructions="Ask yourself.", model="openai/gpt-4o-mini",
                            tools=(ask_agent_tool("loopy", "Ask loopy."),))
    runner = TurnRunner(LiteLLMClient(force_local=True),
                        agents=AgentRegistry([loopy], ConversationStore(None)))  # type: ignore[arg-type]
    # Each level's local model asks loopy again with the rest of the sentence: deeper than allowed.
    question = "use the ask_loopy tool: " * (MAX_ASK_DEPTH + 2) + "hello"
    answer = await runner.ask("loopy", question, None)
    assert f"agents asked each other {MAX_ASK_DEPTH} deep" in answer
