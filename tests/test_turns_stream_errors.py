"""A stream never dies silently (issue 9.4), on both encoders, and it ends as the reference servers end theirs.

Whatever breaks after the response headers were sent (a provider failure, any other
exception) ends the stream with an ``error`` chunk and ``[DONE]``, judged on the gateway by
the real ``ai`` package. A failure inside a step then finishes the step and the message as
the AI SDK's own server does (``error``, ``finish-step``, ``finish`` with reason ``error``;
between steps the ``error`` alone), and the studio's Mastra chunks as Mastra's own agent
loop does (``error``, ``step-finish`` and ``finish`` with reason ``error``): the same
scripts are played by those servers (``tests.kit.reference_streams``) and the shapes
compared. Text that UTF-8 cannot encode (a lone surrogate, sent by a client or read back
from storage) never reaches the wire: the stream completes, with U+FFFD.
The only fake is at the model boundary: a scripted model that fails mid-stream.
"""

from __future__ import annotations

import json
import sqlite3

import pytest

from dev_server.kernel.stream_errors import INTERNAL_MESSAGE
from dev_server.kernel.text import repair_text
from dev_server.llm.scripted import Reply, ScriptedModel
from dev_server.settings import Settings
from tests.kit.chat import judge
from tests.kit.local_http import local_http
from tests.kit.reference_streams import BETWEEN_STEPS, MID_STEP, mastra_shape, reference_streams, ui_shape
from tests.kit.servers import in_process, server_fixture
from tests.support import sqlite_rows, user_message


def broken_model() -> ScriptedModel:
    """Streams two pieces, then fails the way a bug would (not a ModelProviderError)."""
    return ScriptedModel([Reply(["half", " a reply"], error=RuntimeError("a bug after the headers were sent"))])


def data_lines(body: bytes) -> list[str]:
    text = body.decode("utf-8")  # strict: a lone surrogate could not have been encoded
    return [line[6:] for line in text.splitlines() if line.startswith("data: ")]


def chat_raw(url: str, messages: list, conversation: str, api: str = "/api/chat") -> dict:
    """The turn POSTed with plain fetch and parsed by the SDK's own event-stream parser."""
    return judge(url, messages, api=api, raw=True, body={"conversationId": conversation})


@pytest.fixture
def broken_gateway(settings: Settings):
    with in_process("gateway", settings, llm=broken_model()) as server:  # a fresh script per test
        yield server


gateway = server_fixture("gateway", scope="function", data="data_dir", inprocess=True)
studio = server_fixture("studio", scope="function", data="data_dir", inprocess=True)


def test_gateway_stream_broken_mid_way_ends_with_an_error_chunk_and_done(broken_gateway, settings: Settings):
    result = chat_raw(broken_gateway.url, [user_message("b1", "hello")], "broken")
    assert result["ok"], result["error"]  # the SDK accepted every chunk
    assert result["errorChunks"] == [INTERNAL_MESSAGE]
    assert [c["type"] for c in result["chunks"]][-4:] == ["text-delta", "error", "finish-step", "finish"]
    assert result["chunks"][-1] == {"type": "finish", "finishReason": "error"}
    assert result["rawText"].rstrip().endswith("data: [DONE]")
    reply = json.loads(sqlite_rows(settings.resolved_data_dir / "dev-server.db",
                                   "SELECT content FROM messages WHERE thread_id = 'broken'"
                                   " AND role = 'assistant'")[0][0])
    assert reply["content"] == "half a reply" and reply["metadata"]["error"]["kind"] == "internal"


def test_studio_stream_broken_mid_way_ends_with_an_error_chunk_and_done(settings: Settings):
    with in_process("studio", settings, llm=broken_model()) as studio:
        response = local_http.post(f"{studio.url}/api/agents/chat-agent/stream", timeout=30,
                              json={"messages": "hello", "memory": {"thread": "broken-s", "resource": "r"}})
    assert response.status_code == 200
    lines = data_lines(response.content)
    assert lines[-1] == "[DONE]"
    error, step, finish = (json.loads(line) for line in lines[-4:-1])
    assert error["type"] == "error" and error["payload"]["error"] == {"name": "internal", "message": INTERNAL_MESSAGE}
    assert (step["type"], step["payload"]["stepResult"]) == ("step-finish", {"reason": "error", "isContinued": False})
    assert step["payload"]["output"]["text"] == "half a reply"
    assert (finish["type"], finish["payload"]["stepResult"]) == ("finish", {"reason": "error", "isContinued": False})


def test_a_provider_failure_mid_stream_ends_with_done_on_both_encoders(gateway, studio):
    result = chat_raw(gateway.url, [user_message("f1", "break [[fail]]")], "fail-g")
    assert result["ok"] and len(result["errorChunks"]) == 1
    assert result["rawText"].rstrip().endswith("data: [DONE]")
    response = local_http.post(f"{studio.url}/api/agents/chat-agent/stream", timeout=30,
                          json={"messages": "break [[fail]]", "memory": {"thread": "fail-s", "resource": "r"}})
    lines = data_lines(response.content)
    assert lines[-1] == "[DONE]" and [json.loads(line)["type"] for line in lines[-4:-1]] == ["error", "step-finish",
                                                                                             "finish"]


def sent_ui_chunks(result: dict) -> list:
    """The chunks of a judged turn, with the ``[DONE]`` that ended it."""
    return [*result["chunks"], "[DONE]"] if result["rawText"].rstrip().endswith("data: [DONE]") else result["chunks"]


def studio_chunks(url: str, thread: str) -> tuple[list[dict], str]:
    response = local_http.post(f"{url}/api/agents/chat-agent/stream", timeout=30,
                          json={"messages": "hello", "memory": {"thread": thread, "resource": "r"}})
    assert response.status_code == 200
    lines = data_lines(response.content)
    return [json.loads(line) for line in lines[:-1]], lines[-1]


@pytest.mark.parametrize(("case", "script"), [("midStep", MID_STEP), ("betweenSteps", BETWEEN_STEPS)])
def test_a_provider_failure_ends_the_ui_stream_as_the_sdks_own_server_ends_it(settings: Settings, case, script):
    with in_process("gateway", settings, llm=ScriptedModel(script)) as gateway:
        result = chat_raw(gateway.url, [user_message("p1", "hello")], f"sdk-{case}")
    assert result["ok"], result["error"]  # the SDK accepted every chunk
    reference = reference_streams()["ai"][case]
    assert ui_shape(sent_ui_chunks(result)) == ui_shape(reference)
    ours, theirs = (next((c for c in chunks if c != "[DONE]" and c["type"] == "finish"), None)
                    for chunks in (result["chunks"], reference))
    assert ours == theirs  # {"type": "finish", "finishReason": "error"} within a step; none between steps
    assert len(result["errorChunks"]) == 1


@pytest.mark.parametrize(("case", "script"), [("midStep", MID_STEP), ("betweenSteps", BETWEEN_STEPS)])
def test_a_provider_failure_ends_the_studio_stream_as_mastras_own_loop_ends_it(settings: Settings, case, script):
    with in_process("studio", settings, llm=ScriptedModel(script)) as studio:
        chunks, last = studio_chunks(studio.url, f"mastra-{case}")
    assert last == "[DONE]"
    assert mastra_shape(chunks) == mastra_shape(reference_streams()["mastra"][case])
    error = next(c for c in chunks if c["type"] == "error")
    assert error["payload"]["error"]["name"] == "provider"


LONE = (b'{"id":"c","conversationId":"lone","messages":[{"id":"l1","role":"user",'
        b'"parts":[{"type":"text","text":"bad \\ud800 text"}]}]}')


def test_a_lone_surrogate_from_the_client_never_kills_the_stream(gateway, settings: Settings):
    response = local_http.post(f"{gateway.url}/api/chat", content=LONE, headers={"content-type": "application/json"},
                          timeout=30)
    assert response.status_code == 200
    lines = data_lines(response.content)
    assert lines[-1] == "[DONE]" and not [line for line in lines if '"type":"error"' in line]
    assert "bad \ufffd text" in "".join(json.loads(line).get("delta", "") for line in lines[:-1])
    # later turns re-read that message from storage: they must keep working
    again = chat_raw(gateway.url, [user_message("l2", "what did I say earlier?")], "lone")
    assert again["ok"] and not again["errorChunks"] and again["rawText"].rstrip().endswith("data: [DONE]")
    db = settings.resolved_data_dir / "dev-server.db"
    for (content,) in sqlite_rows(db, "SELECT content FROM messages WHERE thread_id = 'lone' AND role = 'assistant'"):
        text = json.loads(content)["content"]
        assert repair_text(text) == text  # the replies were stored repaired


def test_a_lone_surrogate_read_back_from_storage_never_kills_the_stream(gateway, studio, settings: Settings):
    assert chat_raw(gateway.url, [user_message("p1", "hello")], "planted")["ok"]
    db = settings.resolved_data_dir / "dev-server.db"
    # text stored before any input boundary repaired it (the JSON escape survives storage)
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE messages SET content = ? WHERE id = 'p1'",
                     ('{"format":2,"parts":[{"type":"text","text":"old \\ud800 text"}],"content":"old \\ud800 text"}',))
    result = chat_raw(gateway.url, [user_message("p2", "what did I say earlier?")], "planted")
    assert result["ok"] and not result["errorChunks"], result
    assert "old \ufffd text" in "".join(c.get("delta", "") for c in result["chunks"])
    response = local_http.post(f"{studio.url}/api/agents/chat-agent/stream", timeout=30,
                          json={"messages": "what did I say earlier?", "memory": {"thread": "planted",
                                                                                  "resource": "ai-chat"}})
    lines = data_lines(response.content)
    assert lines[-1] == "[DONE]" and not [line for line in lines if '"type":"error"' in line]
