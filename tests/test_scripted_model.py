"""The scripted model (``dev_server.llm.scripted``): the model double the tests script the seam with.

Through real turns (the gateway in-process behind a real uvicorn, real SQLite files, the
real calculator tool): a scripted text is streamed and stored, a scripted tool call runs
the tool and its result reaches the next step, a failure step ends the stream with the
app's error chunk (or, before any text, with its JSON error), and the requests are
recorded with who asked (a thread title is not taken from the turn's script). Directly: a
function of the prompt, delays, a script that runs out, bad scripts. From a server process:
a JSON script named by ``DEV_SERVER_SCRIPTED_MODEL``, its requests recorded to a file, and
never a scripted model unless that is set.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from dev_server.agents.registry import DEFINITIONS
from dev_server.factory import create_app, model_layer
from dev_server.kernel.model import ModelRequest, TextDelta
from dev_server.llm import LiteLLMClient, ModelProviderError
from dev_server.llm.errors import provider_error
from dev_server.llm.scripted import Call, Reply, ScriptedModel
from dev_server.settings import Settings, SettingsError
from tests.kit.local_http import local_http
from tests.support import LiveApp, frames_of, sqlite_rows, ui_chunks, user_message

CHAT_AGENT_INSTRUCTIONS = next(a.instructions for a in DEFINITIONS if a.id == "chat-agent")


def turn(url: str, conversation: str, text: str, message_id: str = "u1") -> tuple[int, list[dict[str, Any]], Any]:
    """One chat turn over HTTP: (status, UI chunks, the JSON error body when it is not a stream)."""
    body = {"id": conversation, "conversationId": conversation, "messages": [user_message(message_id, text)]}
    with local_http.stream("POST", f"{url}/api/chat", json=body, timeout=30) as response:
        if response.status_code != 200:
            return response.status_code, [], json.loads(response.read())
        return 200, ui_chunks(frames_of(response)), None


def text_of(chunks: list[dict[str, Any]]) -> str:
    return "".join(c["delta"] for c in chunks if c["type"] == "text-delta")


def stored_reply(settings: Settings, thread: str) -> dict[str, Any]:
    [(content,)] = sqlite_rows(settings.resolved_data_dir / "dev-server.db",
                               "SELECT content FROM messages WHERE thread_id = ? AND role = 'assistant'", (thread,))
    return json.loads(content)


def user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


async def events_of(model: ScriptedModel, text: str) -> list[Any]:
    return [event async for event in model.stream(ModelRequest("openai/gpt-4o-mini", [user(text)]))]


# -- through real turns ---------------------------------------------------------------------

def test_a_scripted_text_is_streamed_stored_and_its_request_recorded(settings: Settings) -> None:
    model = ScriptedModel(["Hello from the script. "])
    with LiveApp(create_app("gateway", settings, llm=model)) as live:
        status, chunks, _ = turn(live.url, "s1", "hi there")
    assert status == 200 and text_of(chunks) == "Hello from the script. "
    assert [c["type"] for c in chunks][-1] == "finish"
    reply = stored_reply(settings, "s1")
    assert reply["content"] == "Hello from the script. " and reply["metadata"]["local"] is True
    [request] = model.requests_for("agent")
    assert request.messages[0] == {"role": "system", "content": CHAT_AGENT_INSTRUCTIONS}
    assert request.messages[-1]["role"] == "user" and "hi there" in json.dumps(request.messages[-1])
    assert model.calls[0].last_user_text == "hi there" and model.calls[0].scripted
    assert {"calculator", "getUserLocation"} <= set(model.calls[0].tool_names)
    assert model.pending == 0


def test_a_scripted_tool_call_runs_the_real_tool_and_its_result_reaches_the_next_step(settings: Settings) -> None:
    model = ScriptedModel([Reply(tool_calls=[Call("calculator", {"expression": "6 * 7"})]),
                           Reply("The calculator says 42.")])
    with LiveApp(create_app("gateway", settings, llm=model)) as live:
        status, chunks, _ = turn(live.url, "tools", "what is 6 * 7?")
    assert status == 200
    [available] = [c for c in chunks if c["type"] == "tool-input-available"]
    assert (available["toolCallId"], available["toolName"], available["input"]) == \
        ("call_0", "calculator", {"expression": "6 * 7"})
    [output] = [c for c in chunks if c["type"] == "tool-output-available"]
    assert output["toolCallId"] == "call_0" and "42" in json.dumps(output["output"])
    assert "".join(c["inputTextDelta"] for c in chunks if c["type"] == "tool-input-delta") == \
        '{"expression": "6 * 7"}'
    assert text_of(chunks) == "The calculator says 42."
    first, second = model.requests_for("agent")
    assert [m["role"] for m in second.messages[-2:]] == ["assistant", "tool"]
    assert second.messages[-2]["tool_calls"][0]["id"] == "call_0"
    assert second.messages[-1]["tool_call_id"] == "call_0" and "42" in second.messages[-1]["content"]
    assert len(first.messages) == len(second.messages) - 2
    parts = stored_reply(settings, "tools")["parts"]
    [invocation] = [p["toolInvocation"] for p in parts if p["type"] == "tool-invocation"]
    assert (invocation["toolName"], invocation["state"]) == ("calculator", "result")
    assert "42" in json.dumps(invocation["result"])


def test_a_failure_step_ends_the_stream_with_the_apps_error_chunk_or_its_json_error(settings: Settings) -> None:
    model = ScriptedModel([Reply("Half a", error="rate_limit"), Reply(error="timeout")])
    with LiveApp(create_app("gateway", settings, llm=model)) as live:
        status, chunks, _ = turn(live.url, "mid", "hello")
        before_status, _, error = turn(live.url, "before", "hello again", "u2")
    assert status == 200 and text_of(chunks) == "Half a"
    assert [c["type"] for c in chunks][-3:] == ["error", "finish-step", "finish"]  # the SDK's own ending
    assert chunks[-3]["errorText"] == provider_error("rate_limit").message
    reply = stored_reply(settings, "mid")
    assert reply["content"] == "Half a" and reply["metadata"]["error"]["kind"] == "rate_limit"
    assert before_status == 504 and error["kind"] == "timeout"
    assert sqlite_rows(settings.resolved_data_dir / "dev-server.db",
                       "SELECT role FROM messages WHERE thread_id = 'before'") == [("user",)]


def test_a_threads_title_is_scripted_apart_from_the_turns_script(settings: Settings) -> None:
    model = ScriptedModel(["Noted, bees on the roof."], title=["Bees on the roof"])
    db = settings.resolved_data_dir / "dev-server.db"
    with LiveApp(create_app("gateway", settings, llm=model)) as live:
        assert turn(live.url, "bees", "I keep bees on the roof")[0] == 200
        deadline = time.monotonic() + 20
        while sqlite_rows(db, "SELECT title FROM threads WHERE id = 'bees'") != [("Bees on the roof",)]:
            assert time.monotonic() < deadline, sqlite_rows(db, "SELECT title FROM threads")
            time.sleep(0.05)
        assert turn(live.url, "bees", "and a cat", "u2")[0] == 200  # the script ran out: the local model answers
    assert [(c.purpose, c.scripted) for c in model.calls] == [("agent", True), ("title", True), ("agent", False)]
    assert "I keep bees on the roof" in model.calls[1].last_user_text
    first, second = stored_reply_texts(db, "bees")
    assert first == "Noted, bees on the roof." and second.startswith("[local model] ")


def stored_reply_texts(db: Path, thread: str) -> list[str]:
    rows = sqlite_rows(db, "SELECT content FROM messages WHERE thread_id = ? AND role = 'assistant' "
                           "ORDER BY created_at", (thread,))
    return [json.loads(content)["content"] for (content,) in rows]


# -- directly ---------------------------------------------------------------------------------

@pytest.mark.anyio
async def test_a_function_of_the_prompt_answers_and_none_leaves_it_to_the_local_model() -> None:
    def answer(request: ModelRequest) -> str | None:
        text = request.messages[-1]["content"]
        return None if "local" in text else f"You asked: {text}"

    async def slowly(request: ModelRequest) -> Reply:
        return Reply(["a", "b"], reasoning="thinking", finish_reason="length")

    model = ScriptedModel(answer)
    assert "".join(e.text for e in await events_of(model, "why?") if isinstance(e, TextDelta)) == "You asked: why?"
    local = await events_of(model, "ask the local one")
    assert "".join(e.text for e in local if isinstance(e, TextDelta)).startswith("[local model] ")
    assert [c.scripted for c in model.calls] == [True, False]
    events = await events_of(ScriptedModel(slowly), "x")
    assert [type(e).__name__ for e in events] == ["ReasoningDelta", "TextDelta", "TextDelta", "Finish"]
    assert events[-1].finish_reason == "length"


@pytest.mark.anyio
async def test_a_delay_holds_the_first_event_and_the_call_can_be_closed_meanwhile() -> None:
    model = ScriptedModel([Reply("late", delay_s=60)])
    stream = model.stream(ModelRequest("openai/gpt-4o-mini", [user("hi")]))
    first = asyncio.ensure_future(anext(stream))
    done, _ = await asyncio.wait({first}, timeout=0.2)
    assert not done  # still waiting out its delay
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    await stream.aclose()
    assert len(model.calls) == 1


@pytest.mark.anyio
async def test_a_script_that_runs_out_fails_with_then_fail_and_bad_scripts_fail_at_once() -> None:
    model = ScriptedModel(["one"], then="fail")
    await events_of(model, "first")
    with pytest.raises(ModelProviderError) as info:
        await events_of(model, "second")
    assert (info.value.kind, info.value.status) == ("provider", 502) and "no agent reply left" in info.value.message
    assert [c.scripted for c in model.calls] == [True, False]
    with pytest.raises(ValueError, match="unknown model error kind 'nonsense'"):
        Reply(error="nonsense")
    with pytest.raises(ModelProviderError) as bad_id:
        await events_of_model(ScriptedModel(["x"]), "gpt-4o")
    assert bad_id.value.kind == "bad_request"
    resolved = await ScriptedModel(local=False).resolve("openai/gpt-4o-mini")
    assert (resolved.is_local, resolved.litellm_model) == (False, "scripted/openai/gpt-4o-mini")


async def events_of_model(model: ScriptedModel, model_id: str) -> list[Any]:
    return [event async for event in model.stream(ModelRequest(model_id, [user("hi")]))]


# -- from a server process ----------------------------------------------------------------------

def test_a_server_process_plays_a_json_script_and_records_its_requests(start_server: Any, tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({
        "replies": [{"toolCalls": [{"name": "calculator", "arguments": {"expression": "6 * 7"}}]},
                    "The calculator says 42."],
        "title": ["Sums"],
        "record": "requests.jsonl"}))
    gateway = start_server("gateway", env={"DEV_SERVER_SCRIPTED_MODEL": str(script)})
    health = local_http.get(f"{gateway.url}/health").json()
    assert health["models"]["scripted"] == {"pending": 3, "requests": 0}
    assert health["models"]["agents"]["chat-agent"]["answeredBy"] == "scripted/openai/gpt-4o-mini"
    status, chunks, _ = turn(gateway.url, "proc", "what is 6 * 7?")
    assert status == 200 and text_of(chunks) == "The calculator says 42."
    assert "42" in json.dumps([c for c in chunks if c["type"] == "tool-output-available"])
    assert "a scripted model answers the model calls (DEV_SERVER_SCRIPTED_MODEL=" in gateway.output()
    records = [json.loads(line) for line in (tmp_path / "requests.jsonl").read_text().splitlines()]
    agent = [r for r in records if r["purpose"] == "agent"]
    assert len(agent) == 2 and all(r["scripted"] and r["model"] == "openai/gpt-4o-mini" for r in agent)
    assert agent[1]["messages"][-1]["role"] == "tool" and "42" in agent[1]["messages"][-1]["content"]
    assert "calculator" in [t["function"]["name"] for t in agent[0]["tools"]]


def test_the_scripted_model_is_used_only_when_set_and_a_bad_script_stops_the_start(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert Settings().scripted_model is None
    assert isinstance(model_layer(Settings(data_dir=tmp_path), DEFINITIONS), LiteLLMClient)
    good = tmp_path / "good.json"
    good.write_text('["hi"]')
    assert isinstance(model_layer(Settings(data_dir=tmp_path, scripted_model=good), DEFINITIONS), ScriptedModel)
    monkeypatch.setenv("DEV_SERVER_SCRIPTED_MODEL", "")
    assert Settings.load().scripted_model is None  # empty: unset
    bad = tmp_path / "bad.json"
    for text, problem in (('[{"text": "hi", "eror": "auth"}]', "replies.0.eror: Extra inputs"),
                          ('[{"error": "nonsense"}]', "unknown kind 'nonsense'"),
                          ("[not json", "is not JSON")):
        bad.write_text(text)
        monkeypatch.setenv("DEV_SERVER_SCRIPTED_MODEL", str(bad))
        with pytest.raises(SettingsError, match="DEV_SERVER_SCRIPTED_MODEL") as info:
            Settings.load()
        assert problem in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(ValidationError, match="cannot read the script"):
        Settings(scripted_model=tmp_path / "missing.json")
