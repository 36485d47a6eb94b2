"""The studio's tool routes, client tools and ``/generate`` steps, judged by the real ``@mastra/client-js``.

``tests/js/client_tools_studio.mjs`` runs the unchanged client against one live studio:
``listTools`` / ``getTool`` / ``agent.getTool``, ``tool.execute`` with good and invalid
input, a client tool executed on the server, the client-tool loop of ``agent.stream``
(with a thread) and of ``agent.generate`` (without), and ``generate``'s steps.
"""

from __future__ import annotations

import json

import pytest

from tests.kit.local_http import local_http
from tests.kit.reference_streams import mastra_shape, reference_streams
from tests.kit.servers import server_fixture
from tests.kit.traces import wait_for_traces
from tests.support import run_node

studio = server_fixture("studio", inprocess=True)


@pytest.fixture(scope="module")
def client_js(studio):
    result = run_node("client_tools_studio.mjs", {"baseUrl": studio.url, "threadId": "tr-loop",
                                                  "resourceId": "chat-agent"}, timeout=120)
    assert "results" in result, result
    return result["results"]


def schema(info: dict) -> dict:
    return json.loads(info["inputSchema"])["json"]


def test_tools_are_listed_and_described_with_their_json_schema(client_js):
    # server tools only (getUserLocation runs in the client); the orchestrator's agent-as-tool pair too
    assert set(client_js["tools"]) == {"calculator", "ask_chat_agent", "ask_docs_agent"}
    assert client_js["tool"] == client_js["agentTool"] == client_js["tools"]["calculator"]
    assert schema(client_js["tool"])["required"] == ["expression"]


def test_tool_execute_returns_the_result_and_refuses_bad_input(client_js):
    assert client_js["execute"] == {"expression": "6 * 7", "result": 42}
    invalid = client_js["invalid"]
    assert invalid["status"] == 400 and "expression: Field required" in invalid["body"]["error"]
    assert invalid["body"]["issues"] == [{"field": "data.expression", "message": "Field required"}]
    refused = client_js["clientOnServer"]
    assert refused["status"] == 400 and "client tool" in refused["body"]["error"]


def test_a_tool_that_fails_on_its_input_is_a_422_with_its_message(studio):
    response = local_http.post(f"{studio.url}/api/tools/calculator/execute", json={"data": {"expression": "1 / 0"}})
    assert response.status_code == 422, response.text
    assert response.json() == {"error": "ZeroDivisionError: division by zero", "code": "TOOL_FAILED"}


def test_the_client_tool_loop_of_stream_runs_end_to_end(client_js, studio):
    loop = client_js["streamLoop"]
    assert loop["calls"] == [{"city": "Rome"}]  # client-js ran the tool with the model's input
    assert loop["finishes"] == ["tool-calls", "stop"]  # the first run stopped for it, the second answered
    kinds = loop["types"]
    start, end = kinds.index("tool-call-input-streaming-start"), kinds.index("tool-call-input-streaming-end")
    assert kinds[start + 1:end] == ["tool-call-delta"] * 3 and kinds[end + 1] == "tool-call"
    assert json.loads("".join(loop["deltas"])) == {"city": "Rome"}
    assert 'getWeather tool returned: {"city": "Rome", "forecast": "sunny"}' in loop["text"]
    messages = local_http.get(f"{studio.url}/api/memory/threads/tr-loop/messages", params={"agentId": "chat-agent"},
                         timeout=30).json()["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant"]  # continued in the same reply
    parts = messages[1]["content"]["parts"]
    assert [p["type"] for p in parts] == ["tool-invocation", "step-start", "text"]
    assert parts[0]["toolInvocation"]["state"] == "result"
    assert parts[0]["toolInvocation"]["result"] == {"city": "Rome", "forecast": "sunny"}


def test_the_client_tool_loop_of_generate_runs_without_a_thread(client_js):
    loop = client_js["generateLoop"]
    assert loop["calls"] == [{"city": "Oslo"}] and loop["finishReason"] == "stop"
    assert 'getWeather tool returned: {"city": "Oslo", "forecast": "sunny"}' in loop["text"]


def test_generate_reports_each_step_with_its_tool_calls_and_results(client_js):
    result = client_js["generate"]
    assert result["finishReason"] == "stop"
    first, second = result["steps"]
    assert first["finishReason"] == "tool-calls" and second["finishReason"] == "stop"
    [call] = first["toolCalls"]
    assert call["type"] == "tool-call" and call["payload"]["toolName"] == "calculator"
    assert call["payload"]["args"] == {"expression": "2 * 21"}
    [tool_result] = first["toolResults"]
    assert tool_result["payload"]["result"] == {"expression": "2 * 21", "result": 42}
    assert second["text"] == result["text"] and "42" in result["text"]
    assert result["toolCalls"] == [call] and result["toolResults"] == [tool_result]


def test_a_tool_result_for_an_unknown_call_is_a_400(studio):
    body = {"messages": [{"role": "tool", "content": [{"type": "tool-result", "toolCallId": "call_none",
                                                       "toolName": "getWeather", "result": {}}]}],
            "memory": {"thread": "tr-unknown", "resource": "chat-agent"}}
    response = local_http.post(f"{studio.url}/api/agents/chat-agent/stream", json=body, timeout=30)
    assert response.status_code == 400 and "call_none" in response.json()["error"]
    assert local_http.get(f"{studio.url}/api/memory/threads/tr-unknown", params={"agentId": "chat-agent"},
                     timeout=30).status_code == 404  # nothing written


@pytest.mark.parametrize("content", [[], [{"type": "text", "text": "x"}], "plain text"])
@pytest.mark.parametrize("route", ["stream", "generate"])
def test_a_tool_message_without_tool_results_is_a_400(studio, route, content):
    body = {"messages": [{"role": "tool", "content": content}],
            "memory": {"thread": f"tr-empty-{route}", "resource": "r1"}}
    response = local_http.post(f"{studio.url}/api/agents/chat-agent/{route}", json=body, timeout=30)
    assert response.status_code == 400, response.text
    assert "tool results" in response.json()["error"]


def test_unknown_tools_are_404_and_the_agent_lists_its_client_tool(studio):
    assert local_http.get(f"{studio.url}/api/tools/nope", timeout=30).status_code == 404
    assert local_http.post(f"{studio.url}/api/tools/nope/execute", json={"data": {}}, timeout=30).status_code == 404
    detail = local_http.get(f"{studio.url}/api/agents/chat-agent", timeout=30).json()
    assert set(detail["tools"]) == {"calculator", "getUserLocation"}
    assert "reason" in schema(detail["tools"]["getUserLocation"])["properties"]


def test_a_tool_executed_through_the_route_is_a_tool_call_span_of_its_own_trace(studio):
    response = local_http.post(f"{studio.url}/api/tools/calculator/execute", params={"runId": "run-exec-span"},
                          json={"data": {"expression": "1 + 2"}}, timeout=30)
    assert response.status_code == 200 and response.json()["result"] == 3
    where = {"op": "eq", "left": {"path": "runId"}, "right": {"literal": "run-exec-span"}}
    [trace] = wait_for_traces(studio, bool, where=where)
    spans = local_http.get(f"{studio.url}/api/observability/traces/{trace['traceId']}", timeout=30).json()["spans"]
    [span] = spans
    assert span["spanType"] == "tool_call" and span["parentSpanId"] is None and span["name"] == "tool: 'calculator'"


def test_client_tools_are_offered_for_their_run_only(studio):
    weather = {"getWeather": {"id": "getWeather", "description": "The weather (client)",
                              "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}}}}}
    ask = 'call getWeather with {"city": "Bern"}'
    offered = local_http.post(f"{studio.url}/api/agents/chat-agent/generate",
                         json={"messages": ask, "clientTools": weather}, timeout=60).json()
    assert offered["finishReason"] == "tool-calls"
    assert [c["payload"]["toolName"] for c in offered["toolCalls"]] == ["getWeather"] and offered["toolResults"] == []
    assert offered["response"]["messages"][-1]["content"][-1]["type"] == "tool-call"
    later = local_http.post(f"{studio.url}/api/agents/chat-agent/generate", json={"messages": ask}, timeout=60).json()
    assert later["finishReason"] == "stop" and later["toolCalls"] == []  # not offered: the model could not call it


def test_a_client_tool_call_from_the_studio_chat_ends_as_mastras_loop_ends_it(studio):
    """Issue 30: the Studio's chat shows its "reached maxSteps" card for chat-agent's
    getUserLocation. Mastra's own loop, given an agent tool without ``execute``, streams the
    same: the call, then ``step-finish`` and ``finish`` with ``{reason: "tool-calls",
    isContinued: false}`` (the card is the Studio's reading of that finish, on Mastra too)."""
    body = {"messages": 'call getUserLocation with {"reason": "the weather"}',
            "memory": {"thread": "tr-client-tool", "resource": "chat-agent"}}
    response = local_http.post(f"{studio.url}/api/agents/chat-agent/stream", json=body, timeout=30)
    lines = [line[6:] for line in response.text.splitlines() if line.startswith("data: ")]
    assert lines[-1] == "[DONE]"
    chunks = [json.loads(line) for line in lines[:-1]]
    reference = reference_streams()["mastra"]["clientTool"]
    assert mastra_shape(chunks) == mastra_shape(reference)
    ours, theirs = (next(c for c in stream if c["type"] == "finish")["payload"] for stream in (chunks, reference))
    assert ours["stepResult"] == theirs["stepResult"] == {"reason": "tool-calls", "isContinued": False}
    [call] = ours["output"]["toolCalls"]
    [their_call] = theirs["output"]["toolCalls"]
    assert call.keys() == their_call.keys() == {"toolCallId", "toolName", "args"}
    assert (call["toolName"], call["args"]) == (their_call["toolName"], their_call["args"]) == (
        "getUserLocation", {"reason": "the weather"})
