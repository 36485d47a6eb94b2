"""Extractors, thread titles and OM-managed working memory in resource scope (issue 14,
items 1-3): one observer call sees several threads and answers per ``<thread>`` block; each
thread gets its own values, title and (thread-scoped) working memory; working memory shared
by the resource is answered once per call. Real SQLite files, the local model observing;
the last test goes through a live gateway."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from dev_server.agents import chat_agent
from dev_server.kernel.messages import Thread
from dev_server.llm import LiteLLMClient
from dev_server.memory.memory import Memory, MemoryOptions
from dev_server.memory.working_document import WorkingMemoryOptions
from dev_server.om.manual import as_message
from dev_server.om.prompting.prompts import SHARED_SECTIONS_NOTE, observer_messages, observer_system_prompt
from dev_server.storage.conversations import ConversationStore
from dev_server.storage.libsql import LibSQLStore
from tests.kit.chat import turn
from tests.kit.local_http import local_http
from tests.kit.om import FACT, parts
from tests.kit.om_agents import EXTRACTORS, Summary
from tests.kit.servers import serve

HIKING = "I am planning a hiking trip to the Alps with my two kids next summer, and we love glaciers."
GARDEN = "My garden has ferns and tomatoes, and I water the plants every Friday morning before work."


def chat(thread: str, text: str, n: int, start: int = 0) -> list[dict[str, Any]]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": f"{thread} turn {i}. {text}",
             "createdAt": f"2026-01-01T10:{i:02d}:00.000Z"} for i in range(start, start + n)]


async def resource_memory(libsql: LibSQLStore, working: WorkingMemoryOptions,
                          observation: dict[str, Any]) -> Memory:
    store = ConversationStore(libsql)
    for thread in ("hiking", "garden"):
        await store.save_thread(Thread(thread, "r1"))
    await store.append_messages("hiking", [as_message(m, "hiking", "r1") for m in chat("hiking", HIKING, 3)])
    await store.append_messages("garden", [as_message(m, "garden", "r1") for m in chat("garden", GARDEN, 3)])
    memory = Memory(MemoryOptions(last_messages=10, working_memory=working, observational_memory={
        "scope": "resource", "observation": {"messageTokens": 500, "threadTitle": True, **observation},
        "reflection": {"observationTokens": 100_000,
                       "extract": [{"name": "Summary", "instructions": "s", "schema": Summary}]}}),
        store, agent_id="chat-agent")
    return memory


def ends_by_thread(result: Any) -> dict[str, dict[str, Any]]:
    return {p["data"]["threadId"]: p["data"] for p in result.parts if p["type"] == "data-om-observation-end"}


def test_the_multi_thread_prompt_asks_per_thread_and_shows_each_threads_priors() -> None:
    system = observer_system_prompt(multi_thread=True, thread_title=True, shared=["working-memory"])
    assert "its own copy of every optional section" in system
    assert f"{SHARED_SECTIONS_NOTE} <working-memory>." in system
    [task, _] = observer_messages("...", previous_observations=None, prior_current_task=None,
                                  prior_suggested_response=None, prior_extracted=[("working-memory", "# Doc")],
                                  thread_priors={"a": [("thread-title", "Alps"), ("topics", "run 1: x")],
                                                 "b": [("current-task", None)]})
    content = task["content"]
    assert ('<working-memory>\n# Doc\n</working-memory>\n<thread id="a">\n- prior thread-title: Alps\n'
            "<thread-title>\nAlps\n</thread-title>\n<topics>\nrun 1: x\n</topics>\n</thread>") in content
    assert '<thread id="b">' not in content  # a thread with no prior value gets no block


@pytest.mark.anyio
async def test_each_thread_gets_its_own_values_title_and_working_memory(libsql: LibSQLStore) -> None:
    memory = await resource_memory(libsql, WorkingMemoryOptions(scope="thread"),
                                   {"manageWorkingMemory": True, "extract": EXTRACTORS})
    llm = LiteLLMClient(environ={})
    first = await memory.observe("hiking", "r1", llm=llm)
    assert first.observed
    ends = ends_by_thread(first)
    assert set(ends) == {"hiking", "garden"}
    hiking, garden = ends["hiking"]["extractedValues"], ends["garden"]["extractedValues"]
    # inline and passed through onExtracted, each from its own thread's messages
    assert hiking["topics"].startswith("run 1: ") and "hiking turn 2" in hiking["topics"]
    assert hiking["topics"].endswith(" [checked]") and "garden turn" in garden["topics"]
    # the schema extractor's follow-up per thread; a raising onExtracted is a failure of each thread
    assert "hiking" in hiking["profile"]["name"] and "garden" in garden["profile"]["name"]
    assert ends["hiking"]["extractionFailures"] == {"broken": "onExtracted refused it"}
    assert hiking["thread-title"].startswith("hiking turn 0") and garden["thread-title"].startswith("garden")
    # titles and their parts, for the current thread and the other
    updates = {p["data"]["threadId"]: p["data"]["newTitle"] for p in first.parts
               if p["type"] == "data-om-thread-update"}
    assert updates == {"hiking": hiking["thread-title"], "garden": garden["thread-title"]}
    store = memory.store
    for thread, values in (("hiking", hiking), ("garden", garden)):
        stored = await store.get_thread(thread)
        om = stored.metadata["mastra"]["om"]
        assert stored.title == values["thread-title"] and om["threadTitle"] == values["thread-title"]
        assert om["extracted"]["topics"] == values["topics"] and om["currentTask"]
        assert "working-memory" not in json.dumps(om)
    # thread-scoped working memory: each thread's document holds its own statements only
    hiking_wm = await store.working_memory(thread_id="hiking")
    garden_wm = await store.working_memory(thread_id="garden")
    assert "- hiking turn 0." in hiking_wm and "garden" not in hiking_wm
    assert "- garden turn 2." in garden_wm and "hiking" not in garden_wm

    # more in one thread: only it is observed again, and it saw its own previous values
    await store.append_messages("garden", [as_message(m, "garden", "r1") for m in chat("garden", GARDEN, 2, 10)])
    second = await memory.observe("hiking", "r1", llm=llm)
    ends = ends_by_thread(second)
    assert set(ends) == {"garden"} and ends["garden"]["extractedValues"]["topics"].startswith("run 2: ")
    assert (await store.get_thread("hiking")).metadata["mastra"]["om"]["extracted"]["topics"] == hiking["topics"]
    garden_wm = await store.working_memory(thread_id="garden")
    assert "- garden turn 0." in garden_wm and "- garden turn 10." in garden_wm


@pytest.mark.anyio
async def test_shared_working_memory_is_written_once_per_call_and_batches_take_turns(libsql: LibSQLStore) -> None:
    # a batch per thread: the second batch must see (and keep) what the first one wrote
    memory = await resource_memory(libsql, WorkingMemoryOptions(scope="resource"),
                                   {"manageWorkingMemory": True, "maxTokensPerBatch": 50})
    result = await memory.observe("garden", "r1", llm=LiteLLMClient(environ={}))
    ends = ends_by_thread(result)
    assert set(ends) == {"hiking", "garden"}
    document = await memory.store.working_memory(resource_id="r1")
    assert "- hiking turn 0." in document and "- garden turn 2." in document
    # each call reports its update on its thread's end part; the later one kept the earlier lines
    values = [ends[t]["extractedValues"]["working-memory"] for t in ("hiking", "garden")]
    assert document in values and all(line in document for value in values for line in value.splitlines())
    for thread in ("hiking", "garden"):
        assert "working-memory" not in json.dumps((await memory.store.get_thread(thread)).metadata)
    # the resource's log reflected: the reflection's extractors write to the thread that asked
    reflected = await memory.reflect("garden", "r1", llm=LiteLLMClient(environ={}))
    [end] = [p["data"] for p in reflected.parts if p["type"] == "data-om-observation-end"]
    assert reflected.reflected and end["extractedValues"]["summary"]["summary"]
    garden = (await memory.store.get_thread("garden")).metadata["mastra"]["om"]
    assert garden["extracted"]["summary"] == end["extractedValues"]["summary"]


def test_a_resource_scope_gateway_titles_every_observed_thread_and_shares_working_memory(tmp_path: Path) -> None:
    options = {"scope": "resource", "observation": {"messageTokens": 400, "threadTitle": True,
                                                    "manageWorkingMemory": True, "extract": EXTRACTORS[:1]},
               "reflection": {"observationTokens": 100_000}}
    agent = dataclasses.replace(chat_agent.definition, memory=lambda: MemoryOptions(
        last_messages=10, working_memory=WorkingMemoryOptions(scope="resource"), observational_memory=options))
    with serve("gateway", tmp_path, inprocess=True, settings={"telemetry": False}, agents=(agent,)) as server:
        turn(server, "trip", "t1", f"Trip plans. {FACT}")
        results = [turn(server, "chores", f"c{i}", f"Chores list {i}: water the ferns on Friday.")
                   for i in range(1, 8)]
        observed = next(r for r in results if parts(r, "observation-end"))
        with serve("studio", tmp_path, inprocess=True, settings={"telemetry": False}) as studio:
            listed = local_http.get(f"{studio.url}/api/memory/threads",
                               params={"resourceId": "ai-chat", "agentId": "chat-agent"}).json()
    ends = {e["threadId"]: e for e in parts(observed, "observation-end")}
    assert set(ends) == {"trip", "chores"}
    assert ends["trip"]["extractedValues"]["topics"].startswith("run 1: ")
    assert "Trip plans" in ends["trip"]["extractedValues"]["topics"]
    assert "Chores list" in ends["chores"]["extractedValues"]["topics"]
    # the other thread's title arrives on this thread's stream too, and the Studio lists both
    updates = {u["threadId"]: u["newTitle"] for u in parts(observed, "thread-update")}
    assert updates["trip"].startswith("Trip plans") and updates["chores"].startswith("Chores list 1")
    titles = {t["id"]: t["title"] for t in listed["threads"]}
    assert titles["trip"] == updates["trip"] and titles["chores"] == updates["chores"]
    with sqlite3.connect(tmp_path / "dev-server.db") as conn:
        [document] = conn.execute("SELECT working_memory FROM resources WHERE id = 'ai-chat'").fetchone()
    assert "- Trip plans." in document and "- Chores list 1:" in document
