"""Thread titles (dev_server.memory.titles): generated in the background after the first exchange.

Through live apps (in this process, over real HTTP): the studio's thread list read by the
real ``@mastra/client-js`` (``memory_threads.mjs``), and a gateway client that hangs up
mid-reply. Directly, on a real SQLite store: a deleted thread is not re-created, a foreign
or titled thread is left alone, and a model that fails is logged and forgotten.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from dev_server.background import BackgroundWork
from dev_server.factory import storage_for
from dev_server.kernel.clock import now_iso
from dev_server.kernel.messages import Message
from dev_server.kernel.model import ResolvedModel
from dev_server.llm import LiteLLMClient
from dev_server.llm.scripted import Reply, ScriptedModel
from dev_server.memory.memory import Memory, MemoryOptions
from dev_server.memory.titles import TitleGenerator, clean_title
from dev_server.storage.conversations import ConversationStore
from tests.kit.local_http import background_idle, local_http
from tests.kit.servers import serving
from tests.support import run_node, sqlite_rows, user_message


@pytest.fixture(scope="module")
def studio(tmp_path_factory):
    data = tmp_path_factory.mktemp("studio-titles")
    with serving("studio", data) as server:
        yield server


def studio_turn(studio, thread: str, resource: str, text: str) -> None:
    with local_http.stream("POST", f"{studio.url}/api/agents/chat-agent/stream", timeout=30,
                      json={"messages": [{"role": "user", "content": text}],
                            "memory": {"thread": thread, "resource": resource}}) as response:
        assert response.status_code == 200
        response.read()


def listed(studio, resource: str, titled: str | None = None) -> dict:
    payload = {"baseUrl": studio.url, "resourceId": resource, "agentId": "chat-agent"}
    if titled:
        payload["titled"] = titled
    return run_node("memory_threads.mjs", payload)


def test_the_first_exchange_titles_the_thread_in_client_js_thread_list(studio):
    studio_turn(studio, "titled-1", "res-titles-1", "Plan a weekend trip to Lisbon in May, please")
    result = listed(studio, "res-titles-1", titled="titled-1")
    assert result["ok"], result
    [thread] = result["threads"]
    assert thread["title"] == "Plan a weekend trip to Lisbon"  # the local model: the first six words
    config = local_http.get(f"{studio.url}/api/memory/config", params={"agentId": "chat-agent"}).json()["config"]
    assert config["generateTitle"] is True


def test_a_title_is_not_overwritten_by_later_turns_or_over_a_users_title(studio):
    studio_turn(studio, "titled-2", "res-titles-2", "first question about tides")
    assert listed(studio, "res-titles-2", titled="titled-2")["ok"]
    renamed = local_http.patch(f"{studio.url}/api/memory/threads/titled-2", params={"agentId": "chat-agent"},
                          json={"title": "Tides, renamed by me"})
    assert renamed.status_code == 200
    done = local_http.get(f"{studio.url}/health").json()["background"]["done"]
    studio_turn(studio, "titled-2", "res-titles-2", "second question about the moon")
    created = local_http.post(f"{studio.url}/api/memory/threads", params={"agentId": "chat-agent"},
                         json={"threadId": "titled-3", "resourceId": "res-titles-2", "title": "Chosen up front"})
    assert created.status_code == 200
    studio_turn(studio, "titled-3", "res-titles-2", "a question in a thread that has a title")
    background_idle(studio.url, timeout=15, done_at_least=done)
    titles = {t["id"]: t["title"] for t in listed(studio, "res-titles-2")["threads"]}
    assert titles == {"titled-2": "Tides, renamed by me", "titled-3": "Chosen up front"}


def test_a_title_still_appears_after_the_client_hung_up(data_dir: Path):
    with serving("gateway", data_dir) as gateway:
        payload = {"api": f"{gateway.url}/api/chat",
                   "messages": [user_message("h1", "tell me something long [[slow]]")],
                   "body": {"conversationId": "hung-up"}, "headers": {}, "trigger": "submit-message",
                   "chatId": "hung-up", "abortAfterChunks": 4}
        assert run_node("chat_client.mjs", payload)["aborted"]
        deadline = time.monotonic() + 15
        rows: list[tuple] = []
        while time.monotonic() < deadline:
            rows = sqlite_rows(data_dir / "dev-server.db", "SELECT title FROM threads WHERE id = 'hung-up'")
            if rows and rows[0][0]:
                break
            time.sleep(0.1)
        assert rows == [("tell me something long",)]


# -- the job itself, on a real store ------------------------------------------------------------


@pytest.fixture
async def memory(settings) -> AsyncIterator[Memory]:
    storage = storage_for("gateway", settings)
    await storage.open()
    memory = Memory(MemoryOptions(generate_title=True), ConversationStore(storage.default), agent_id="chat-agent",
                    agent_resource="ai-chat", background=BackgroundWork())
    yield memory
    await storage.close()


async def seeded(memory: Memory, thread_id: str, resource: str = "r1", title: str = "") -> None:
    await memory.store.ensure_thread(thread_id, resource, title=title, agent_id="chat-agent")
    await memory.store.append_messages(thread_id, [Message(
        id=f"{thread_id}-u", thread_id=thread_id, resource_id=resource, role="user",
        content={"format": 2, "parts": [{"type": "text", "text": "How do I bake sourdough bread at home?"}]},
        created_at=now_iso())])


async def local_model(settings) -> tuple[LiteLLMClient, ResolvedModel]:
    llm = LiteLLMClient.from_settings(settings)
    return llm, await llm.resolve("openai/gpt-4o-mini")


@pytest.mark.anyio
async def test_the_job_titles_an_untitled_thread_and_leaves_others_alone(memory: Memory, settings) -> None:
    llm, model = await local_model(settings)
    titles = TitleGenerator(memory.store, memory.background)
    await seeded(memory, "t-new")
    await seeded(memory, "t-placeholder", title="New Thread 2026-12-02T06:00:00.000Z")
    await seeded(memory, "t-titled", title="Mine")
    for thread in ("t-new", "t-placeholder", "t-titled"):
        await titles.write_title(llm, model, thread, "r1")
    await titles.write_title(llm, model, "t-new", "someone-else")  # wrong resource: not even read
    got = {t: (await memory.store.get_thread(t)).title for t in ("t-new", "t-placeholder", "t-titled")}
    assert got == {"t-new": "How do I bake sourdough bread", "t-placeholder": "How do I bake sourdough bread",
                   "t-titled": "Mine"}


@pytest.mark.anyio
async def test_nothing_is_written_for_a_deleted_thread(memory: Memory, settings) -> None:
    llm, model = await local_model(settings)
    await seeded(memory, "t-gone")
    await memory.store.delete_thread("t-gone")
    await TitleGenerator(memory.store, memory.background).write_title(llm, model, "t-gone", "r1")
    assert await memory.store.get_thread("t-gone") is None
    # deleted between the job's read and its write: the conditional update writes nothing
    assert await memory.set_title("t-gone", "r1", "Too late") is False
    assert await memory.store.get_thread("t-gone") is None
    await seeded(memory, "t-other", resource="r2")
    assert await memory.set_title("t-other", "r1", "Not yours") is False
    assert (await memory.store.get_thread("t-other")).title == ""


@pytest.mark.anyio
async def test_a_failing_title_model_is_logged_and_forgotten(memory: Memory, caplog) -> None:
    from dev_server.kernel.processors import ReplyContext

    work = memory.background
    await work.start()
    await seeded(memory, "t-broken")
    thread = await memory.store.get_thread("t-broken")
    reply = Message(id="a1", thread_id="t-broken", resource_id="r1", role="assistant",
                    content={"format": 2, "parts": []}, created_at=now_iso())
    llm = ScriptedModel(title=[Reply(error=RuntimeError("the title model is down"))], local=False)
    done = ReplyContext("chat-agent", thread, "r1", reply, llm=llm, model=await llm.resolve("test/broken"))
    with caplog.at_level(logging.WARNING, logger="dev_server.background"):
        await TitleGenerator(memory.store, work).finish(done)  # returns at once
        await work.drain()
    assert work.stats()["failed"] == 1 and "the title model is down" in caplog.text
    assert (await memory.store.get_thread("t-broken")).title == ""


def test_a_model_answer_is_cleaned_into_a_title() -> None:
    assert clean_title('<think>hmm</think>  "Sourdough: a beginner\'s guide"\n') == "Sourdough a beginner's guide"
    assert len(clean_title("word " * 40)) == 80
