"""Tool turns: the step loop with the built-in local model calling chat-agent's calculator.

Gateway turns (a gateway in this process, over real HTTP) are judged by the real ``ai``
package (``chat_client.mjs``: every chunk through the SDK's schema, the final UI message
built by ``readUIMessageStream``); studio turns read Mastra's chunks over real HTTP. The local model's tool phrases are
documented in ``dev_server.llm.local_model``.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from pydantic import BaseModel

from dev_server.factory import create_app
from dev_server.kernel.convert import assistant_message, to_model_messages
from dev_server.kernel.tools import Tool, ToolContext, execute
from dev_server.settings import Settings
from tests.kit.local_http import local_http
from tests.kit.servers import serving
from tests.support import LiveApp, run_node, sqlite_rows, user_message

CALL = ToolContext(call_id="call_1", agent_id="chat-agent", run_id="run_1")


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    data = tmp_path_factory.mktemp("gateway-tools")
    with serving("gateway", data) as server:
        yield server, data / "dev-server.db"


def send(server, conversation: str, message_id: str, text: str, history: list | None = None):
    payload = {"api": f"{server.url}/api/chat", "messages": [*(history or []), user_message(message_id, text)],
               "body": {"conversationId": conversation}, "headers": {}, "trigger": "submit-message",
               "chatId": conversation}
    return run_node("chat_client.mjs", payload)


def types(result) -> list[str]:
    return [c["type"] for c in result["chunks"]]


def stored_parts(db: Path, conversation: str) -> list[dict]:
    rows = sqlite_rows(db, "SELECT content FROM messages WHERE thread_id = ? AND role = 'assistant' "
                           "ORDER BY created_at", (conversation,))
    return [json.loads(row[0])["parts"] for row in rows]


def test_two_step_tool_turn_streams_tool_parts_and_stores_them(shared):
    gateway, db = shared
    result = send(gateway, "tools-1", "u1", "use the calculator tool: 6 * 7")
    assert result["ok"], result["error"]
    deltas = ["tool-input-delta"] * types(result).count("tool-input-delta")
    # chat-agent has Observational Memory: its transient status part comes before each step (as Mastra's)
    assert types(result) == ["start", "data-om-status", "start-step", "tool-input-start", *deltas,
                             "tool-input-available", "tool-output-available", "finish-step", "data-om-status",
                             "start-step", "text-start",
                             *["text-delta"] * (types(result).count("text-delta")), "text-end", "finish-step",
                             "finish"]
    parts = result["message"]["parts"]
    assert [p["type"] for p in parts] == ["step-start", "tool-calculator", "step-start", "text"]
    tool = parts[1]
    assert tool["state"] == "output-available" and tool["input"] == {"expression": "6 * 7"}
    assert tool["output"] == {"expression": "6 * 7", "result": 42}
    assert '"result": 42' in parts[3]["text"]
    assert result["chunks"][-1]["finishReason"] == "stop"
    [stored] = stored_parts(db, "tools-1")
    # stored as Mastra stores a reply: a step-start between the steps, none before the first
    assert [p["type"] for p in stored] == ["tool-invocation", "step-start", "text"]
    assert stored[0]["toolInvocation"] == {"state": "result", "toolCallId": tool["toolCallId"],
                                           "toolName": "calculator", "args": {"expression": "6 * 7"},
                                           "result": {"expression": "6 * 7", "result": 42}}


def test_stored_tool_parts_are_re_fed_on_the_next_turn(shared):
    gateway, _ = shared
    assert send(gateway, "tools-2", "u1", "use the calculator tool: 2 + 2")["ok"]
    second = send(gateway, "tools-2", "u2", "thanks")
    assert second["ok"], second["error"]
    text = "".join(p.get("text", "") for p in second["message"]["parts"] if p["type"] == "text")
    # user, assistant tool_calls, tool result, assistant text (flattened it would be 2)
    assert "I can see 4 earlier messages" in text, text


def test_a_tool_error_is_reported_and_the_step_goes_on(shared):
    gateway, db = shared
    result = send(gateway, "tools-3", "u1", 'call calculator with {"nope": 1}')
    assert result["ok"], result["error"]
    kinds = types(result)
    assert "tool-output-error" in kinds and kinds.index("tool-output-error") < kinds.index("text-start")
    error = next(c for c in result["chunks"] if c["type"] == "tool-output-error")
    assert "expression" in error["errorText"] and "Field required" in error["errorText"]
    tool = result["message"]["parts"][1]
    assert tool["type"] == "tool-calculator" and tool["state"] == "output-error"
    assert "Invalid arguments" in result["message"]["parts"][-1]["text"]
    [stored] = stored_parts(db, "tools-3")
    assert stored[0]["toolInvocation"]["isError"] is True


def test_a_raising_tool_is_a_tool_error(shared):
    gateway, _ = shared
    result = send(gateway, "tools-4", "u1", "use the calculator tool: 1 / 0")
    assert result["ok"], result["error"]
    error = next(c for c in result["chunks"] if c["type"] == "tool-output-error")
    assert "ZeroDivisionError" in error["errorText"]
    assert result["chunks"][-1] == {**result["chunks"][-1], "type": "finish", "finishReason": "stop"}


def test_a_model_that_keeps_calling_tools_stops_at_max_steps(shared):
    gateway, db = shared
    result = send(gateway, "tools-5", "u1", "use the calculator tool: 1 + 1 [[loop]]")
    assert result["ok"], result["error"]
    kinds = types(result)
    # chat-agent's max_steps model steps, then the note step (tests/test_client_tools.py)
    assert kinds.count("start-step") == 6 and kinds.count("finish-step") == 6
    assert kinds.count("tool-output-available") == 5 and "data-max-steps" in kinds
    assert result["chunks"][-1]["finishReason"] == "tool-calls"
    [stored] = stored_parts(db, "tools-5")
    assert [p["type"] for p in stored].count("tool-invocation") == 5


def test_studio_stream_sends_mastra_tool_chunks(settings: Settings):
    body = {"messages": "use the calculator tool: 3 * 3", "memory": {"thread": "s-tools", "resource": "ai-chat"}}
    with LiveApp(create_app("studio", settings)) as server:
        with local_http.stream("POST", f"{server.url}/api/agents/chat-agent/stream", json=body, timeout=60) as response:
            assert response.status_code == 200
            lines = [line[6:] for line in response.iter_lines() if line.startswith("data: ")]
        chunks = [json.loads(line) for line in lines if line != "[DONE]"]
        kinds = [c["type"] for c in chunks]
        deltas = ["tool-call-delta"] * kinds.count("tool-call-delta")
        assert kinds[:len(deltas) + 8] == ["start", "data-om-status", "step-start", "tool-call-input-streaming-start",
                                           *deltas, "tool-call-input-streaming-end", "tool-call", "tool-result",
                                           "step-finish"]
        call, result, first_step = (chunks[kinds.index(kind)]["payload"]
                                    for kind in ("tool-call", "tool-result", "step-finish"))
        assert call["toolName"] == "calculator" and call["args"] == {"expression": "3 * 3"}
        assert result["toolCallId"] == call["toolCallId"] and result["result"]["result"] == 9
        assert first_step["stepResult"] == {"reason": "tool-calls", "isContinued": True}
        assert first_step["output"]["toolCalls"][0]["toolName"] == "calculator"
        last_step = [c for c in chunks if c["type"] == "step-finish"][-1]["payload"]
        assert last_step["stepResult"] == {"reason": "stop", "isContinued": False}
        assert kinds[-1] == "finish" and "9" in chunks[-1]["payload"]["output"]["text"]
        messages = local_http.get(f"{server.url}/api/memory/threads/s-tools/messages",
                             params={"agentId": "chat-agent"}, timeout=30).json()["messages"]
        reply = [m for m in messages if m["role"] == "assistant"][-1]
        assert [p["type"] for p in reply["content"]["parts"]] == ["tool-invocation", "step-start", "text"]


def test_stored_tool_invocations_become_tool_calls_and_tool_messages():
    parts = [{"type": "step-start"}, {"type": "text", "text": "Let me check."},
             {"type": "tool-invocation", "toolInvocation": {"state": "result", "toolCallId": "c1",
                                                            "toolName": "calculator", "args": {"expression": "1"},
                                                            "result": {"result": 1}}},
             {"type": "tool-invocation", "toolInvocation": {"state": "result", "toolCallId": "c2",
                                                            "toolName": "calculator", "args": {}, "result": "bad",
                                                            "isError": True}},
             {"type": "step-start"}, {"type": "text", "text": "It is 1."}]
    message = assistant_message("m1", "t", "r", parts, "2026-01-01T00:00:00.000Z", {})
    assert message.content["content"] == "Let me check.It is 1."
    assert to_model_messages([message]) == [
        {"role": "assistant", "content": "Let me check.",
         "tool_calls": [{"id": "c1", "type": "function",
                         "function": {"name": "calculator", "arguments": '{"expression": "1"}'}},
                        {"id": "c2", "type": "function", "function": {"name": "calculator", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": '{"result": 1}'},
        {"role": "tool", "tool_call_id": "c2", "content": '{"error": "bad"}'},
        {"role": "assistant", "content": "It is 1."},
    ]


class Nothing(BaseModel):
    pass


def test_a_tool_past_its_timeout_is_an_error_result():
    async def slow(_: Nothing, __: ToolContext) -> str:
        await asyncio.sleep(5)
        return "late"

    tool = Tool("slow", "sleeps", Nothing, slow, timeout_s=0.05)
    outcome = asyncio.run(execute({"slow": tool}, "slow", "{}", CALL))
    assert outcome.output is None and "did not finish within 0.05 s" in (outcome.error or "")
    assert asyncio.run(execute({"slow": tool}, "slow", "{not json", CALL)).error.startswith(
        "The arguments are not valid JSON")
    assert asyncio.run(execute({}, "ghost", "{}", CALL)).error == "Unknown tool 'ghost'"


def test_the_tool_json_schema_comes_from_its_input_model():
    from dev_server.agents.calculator import calculator

    spec = calculator.openai_spec()
    assert spec["type"] == "function" and spec["function"]["name"] == "calculator"
    assert spec["function"]["parameters"]["required"] == ["expression"]


def test_studio_lists_an_agents_tools_with_their_json_schema(settings: Settings):
    with LiveApp(create_app("studio", settings)) as server:
        listed = local_http.get(f"{server.url}/api/agents", timeout=30).json()
        detail = local_http.get(f"{server.url}/api/agents/chat-agent", timeout=30).json()
    tool = listed["chat-agent"]["tools"]["calculator"]
    assert detail["tools"] == listed["chat-agent"]["tools"]
    assert tool["id"] == "calculator" and tool["description"]
    schema = json.loads(tool["inputSchema"])["json"]  # superjson-wrapped, as Mastra sends it
    assert schema["required"] == ["expression"] and schema["properties"]["expression"]["type"] == "string"
    assert listed["docs-agent"]["tools"] == {}
