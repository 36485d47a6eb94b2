"""Client tools, streamed tool input and the max_steps note, through the live gateway and the real ``ai`` package.

The round trip is ``tests/js/client_tools_chat.mjs``: the SDK's own ``AbstractChat`` with
``DefaultChatTransport`` and ``sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithToolCalls``,
answering chat-agent's ``getUserLocation`` with ``addToolResult`` (the local model calls it
for ``call getUserLocation with {...}``). Other turns go through ``chat_client.mjs``.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from dev_server.kernel.events import DataPart, ReasoningDelta, StepStart, TextDelta, edge_events
from dev_server.kernel.loop import max_steps_message
from dev_server.kernel.model import Finish, Usage
from dev_server.streaming.ui_chunks import event_chunks as _ui_chunks
from tests.kit.local_http import local_http
from tests.kit.servers import serving
from tests.support import run_node, sqlite_rows, user_message

ASK_LOCATION = 'call getUserLocation with {"reason": "the weather"}'


@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    data = tmp_path_factory.mktemp("client-tools")
    with serving("gateway", data) as server:
        yield server, data / "dev-server.db"


def round_trip(server, conversation: str, **answer):
    return run_node("client_tools_chat.mjs", {"api": f"{server.url}/api/chat", "conversationId": conversation,
                                              "text": ASK_LOCATION, **answer})


def types(chunks: list[dict]) -> list[str]:
    return [c["type"] for c in chunks]


def stored(db: Path, conversation: str) -> list[tuple[str, str, dict]]:
    rows = sqlite_rows(db, "SELECT id, role, content FROM messages WHERE thread_id = ? ORDER BY created_at, seq",
                       (conversation,))
    return [(row[0], row[1], json.loads(row[2])) for row in rows]


def test_a_client_tool_round_trip_with_add_tool_result(gateway):
    server, db = gateway
    result = round_trip(server, "ct-1", output={"city": "Rome"})
    assert result["ok"], result
    first, then = result["requests"]
    # The first response stops at the call: no output, finish reason tool-calls.
    kinds = types(first["chunks"])
    assert kinds[-3:] == ["tool-input-available", "finish-step", "finish"] and "tool-output-available" not in kinds
    assert first["chunks"][-1]["finishReason"] == "tool-calls"
    [waiting] = [p for p in result["first"][-1]["parts"] if p["type"] == "tool-getUserLocation"]
    assert waiting["state"] == "input-available" and waiting["input"] == {"reason": "the weather"}
    # The Chat sent the continuation by itself: the assistant message, last, with the output.
    sent = then["body"]["messages"][-1]
    assert sent["role"] == "assistant" and then["body"]["messageId"] == sent["id"]
    assert then["chunks"][0] == {**then["chunks"][0], "type": "start", "messageId": sent["id"]}
    assert then["chunks"][-1]["finishReason"] == "stop"
    # useChat shows one assistant message: the call with its output, then the answer.
    assert [m["role"] for m in result["messages"]] == ["user", "assistant"]
    parts = result["messages"][-1]["parts"]
    assert [p["type"] for p in parts] == ["step-start", "tool-getUserLocation", "step-start", "text"]
    assert parts[1]["state"] == "output-available" and parts[1]["output"] == {"city": "Rome"}
    assert 'The getUserLocation tool returned: {"city": "Rome"}' in parts[3]["text"]
    # A reload shows the same: one stored reply, same id, the same parts (stored as Mastra
    # stores a reply: no step-start before the first step, one before the continuation's).
    rows = stored(db, "ct-1")
    assert [(role, mid == sent["id"]) for mid, role, _ in rows] == [("user", False), ("assistant", True)]
    reply = rows[1][2]
    assert [p["type"] for p in reply["parts"]] == ["tool-invocation", "step-start", "text"]
    assert reply["parts"][0]["toolInvocation"] == {"state": "result", "toolCallId": parts[1]["toolCallId"],
                                                   "toolName": "getUserLocation", "args": {"reason": "the weather"},
                                                   "result": {"city": "Rome"}}
    assert reply["parts"][2]["text"] == parts[3]["text"] and reply["metadata"]["finishReason"] == "stop"


def test_a_client_tool_error_is_stored_as_an_error_result(gateway):
    server, db = gateway
    result = round_trip(server, "ct-2", errorText="the user said no")
    assert result["ok"], result
    parts = result["messages"][-1]["parts"]
    assert parts[1]["state"] == "output-error" and parts[1]["errorText"] == "the user said no"
    invocation = stored(db, "ct-2")[1][2]["parts"][0]["toolInvocation"]
    assert invocation["isError"] is True and invocation["result"] == "the user said no"
    assert '"error": "the user said no"' in parts[-1]["text"]


def test_a_tool_result_for_a_call_the_thread_does_not_have_pending_is_a_400(gateway):
    server, db = gateway
    assert round_trip(server, "ct-3", output={"city": "Oslo"})["ok"]
    before = stored(db, "ct-3")
    reply_id = before[1][0]

    def answer(call_id: str) -> httpx.Response:
        assistant = {"id": reply_id, "role": "assistant", "parts": [
            {"type": "step-start"}, {"type": "tool-getUserLocation", "toolCallId": call_id, "state": "output-available",
                                     "input": {}, "output": {"city": "Paris"}}]}
        body = {"messages": [user_message("u-x", ASK_LOCATION), assistant], "conversationId": "ct-3",
                "trigger": "submit-message", "messageId": reply_id}
        return local_http.post(f"{server.url}/api/chat", json=body, timeout=30)

    unknown = answer("call_nobody_made")
    assert unknown.status_code == 400 and "call_nobody_made" in unknown.json()["error"]
    answered = answer(before[1][2]["parts"][0]["toolInvocation"]["toolCallId"])  # already answered: not pending
    assert answered.status_code == 400 and "pending" in answered.json()["error"]
    assert stored(db, "ct-3") == before  # nothing written


def test_tool_input_streams_in_deltas_the_sdk_assembles(gateway):
    server, _ = gateway
    payload = {"api": f"{server.url}/api/chat",
               "messages": [user_message("u1", 'call calculator with {"expression": "6 * 7"}')],
               "body": {"conversationId": "ct-4"}, "headers": {}, "trigger": "submit-message", "chatId": "ct-4"}
    result = run_node("chat_client.mjs", payload)
    assert result["ok"], result["error"]
    kinds = types(result["chunks"])
    start, available = kinds.index("tool-input-start"), kinds.index("tool-input-available")
    assert kinds[start + 1:available] == ["tool-input-delta"] * 3  # the local model's three pieces
    deltas = [c["inputTextDelta"] for c in result["chunks"] if c["type"] == "tool-input-delta"]
    assert json.loads("".join(deltas)) == {"expression": "6 * 7"}
    tool = result["message"]["parts"][1]
    assert tool["input"] == {"expression": "6 * 7"} and tool["output"]["result"] == 42


def test_max_steps_ends_with_a_note_step_the_sdk_and_a_reload_show(gateway):
    server, db = gateway
    payload = {"api": f"{server.url}/api/chat",
               "messages": [user_message("u1", "use the calculator tool: 1 + 1 [[loop]]")],
               "body": {"conversationId": "ct-5"}, "headers": {}, "trigger": "submit-message", "chatId": "ct-5"}
    result = run_node("chat_client.mjs", payload)
    assert result["ok"], result["error"]
    assert result["chunks"][-1]["finishReason"] == "tool-calls"
    parts = result["message"]["parts"]
    last_step = parts[max(i for i, p in enumerate(parts) if p["type"] == "step-start") + 1:]
    note = {"maxSteps": 5, "message": max_steps_message(5)}
    assert [p["type"] for p in last_step] == ["data-max-steps", "text"]
    assert last_step[0]["data"] == note and last_step[1]["text"] == note["message"]
    reply = stored(db, "ct-5")[-1][2]
    # (chat-agent's Observational Memory caches each part's token estimate in providerMetadata)
    last_parts = [{k: v for k, v in p.items() if k != "providerMetadata"} for p in reply["parts"][-2:]]
    assert last_parts == [{"type": "data-max-steps", "data": note}, {"type": "text", "text": note["message"]}]


@pytest.mark.anyio
async def test_reasoning_and_data_parts_become_ui_chunks():
    async def rest():
        for event in (ReasoningDelta("hmm"), ReasoningDelta("..."), TextDelta("Hi"),
                      DataPart("om-status", {"ok": True}, id="d1", transient=True), Finish("stop", Usage(1, 1))):
            yield event

    chunks = []
    part_id = "p"
    async for event in edge_events(StepStart(0), rest()):
        chunks += _ui_chunks(event, part_id)
    assert types(chunks) == ["start-step", "reasoning-start", "reasoning-delta", "reasoning-delta", "reasoning-end",
                             "text-start", "text-delta", "text-end", "data-om-status", "finish"]
    assert chunks[8] == {"type": "data-om-status", "id": "d1", "data": {"ok": True}, "transient": True}
