"""Observational Memory's ``recall`` tool (issue 13, item 6; docs/observational-memory.md#retrieval).

On real SQLite files with the built-in local model: the tool's three modes (messages,
threads, search by keyword and by meaning), the limits of its scopes, and one real turn in
which the model calls it. Groups and options: tests/test_om_groups.py.
"""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from dev_server.memory.memory import Memory
from dev_server.om.prompting.groups import parse_groups
from dev_server.om.retrieval.recall_tool import Caller, Recall, RecallInput
from dev_server.storage.libsql import LibSQLStore
from tests.kit.builders import stored_data, stored_text, stored_tool_invocation
from tests.kit.chat import reply_text, turn
from tests.kit.om import FACT, HEX16
from tests.kit.om_agents import om_setup
from tests.kit.servers import serve

anyio = pytest.mark.anyio
LONG = " ".join(f"word{i}" for i in range(3000))  # far over one part's budget and a page's


async def recall_setup(db: LibSQLStore, scope: str = "resource", vector: bool = False) -> tuple[Recall, Memory,
                                                                                              Any]:
    """Thread ``t`` (30 messages: m00..m29, a data-only one at m07, a long text at m12, a
    calculator call at m15, a huge part at m20), thread ``u`` and ``v`` of the same
    resource, thread ``x`` of another one. ``t``'s messages m00..m09 are an observation group."""
    messages = []
    for i in range(30):
        role = "user" if i % 2 == 0 else "assistant"
        if i == 7:
            messages.append(stored_data("m07", 7))
            continue
        text = f"Message {i} about the garden." if i not in (12, 20) else (LONG if i == 20 else " ".join(
            ["The long story of the beehive."] * 60))
        message = stored_text(f"m{i:02d}", role, text, i)
        if i == 15:
            message.content["parts"].append(stored_tool_invocation("call_1", "calculator", {"expression": "6 * 7"},
                                                            {"expression": "6 * 7", "result": 42}))
        messages.append(message)
    messages += [stored_text("u1", "user", "Plans for the Alps hiking trip.", 40, thread="u"),
                 stored_text("v1", "user", "Shopping list: eggs.", 41, thread="v"),
                 stored_text("x1", "user", "Secret Alps hiking notes of someone else.", 42, thread="x",
                              resource="other")]
    memory, engine, ctx = await om_setup(db, messages, {"retrieval": {"scope": scope, "vector": vector}})
    record = await engine.records.initialize(scope="thread", thread_id="t", resource_id="r", config={},
                                             timezone="UTC")
    await engine.observe(ctx, record, messages[:10], 500)
    recall = Recall(memory.store, memory.vectors, engine, engine.options.retrieval)
    caller = Caller(await memory.store.get_thread("t"), "r")
    return recall, memory, caller


async def call(recall: Recall, caller: Caller, **args: Any) -> dict[str, Any]:
    return await recall.run(RecallInput.model_validate(args), caller)


def shown_ids(result: dict[str, Any]) -> list[str]:
    return re.findall(r"^\*\*\w+ \([^)]*\)\*\* \[([^\]]+)\]:$", result["messages"], re.M)


@anyio
async def test_messages_page_forward_and_back_from_a_cursor(libsql: LibSQLStore) -> None:
    recall, _, caller = await recall_setup(libsql)
    forward = await call(recall, caller, cursor="m04", limit=4)
    assert shown_ids(forward) == ["m05", "m06", "m08", "m09"]  # the data-only m07 takes no room
    assert (forward["hasNextPage"], forward["hasPrevPage"], forward["count"], forward["page"]) == (True, False, 4, 1)
    assert "**user (2026-01-01 10:06:00Z)** [m06]:\n  [p0] Message 6 about the garden." in forward["messages"]
    page_two = await call(recall, caller, cursor="m04", limit=4, page=2)
    assert shown_ids(page_two) == ["m10", "m11", "m12", "m13"] and page_two["hasPrevPage"] is True
    back = await call(recall, caller, cursor="m04", page=-1, limit=3)
    assert shown_ids(back) == ["m01", "m02", "m03"] and back["hasPrevPage"] is True and back["hasNextPage"] is False
    first = await call(recall, caller, cursor="m04", page=-2, limit=3)
    assert shown_ids(first) == ["m00"] and first["hasPrevPage"] is False and first["hasNextPage"] is True
    # without a cursor: from the start, or back from the end
    start = await call(recall, caller, limit=2)
    assert shown_ids(start) == ["m00", "m01"] and start["cursor"] == "m00" and start["hasNextPage"] is True
    end = await call(recall, caller, anchor="end", limit=2)
    assert shown_ids(end) == ["m28", "m29"] and end["hasPrevPage"] is True and end["hasNextPage"] is False
    # a range is not a cursor
    ranged = await call(recall, caller, cursor="m00:m09")
    assert ranged["count"] == 0 and 'start="m00" or end="m09"' in ranged["messages"]


@anyio
async def test_a_page_leaves_out_the_turns_own_input_and_names_only_another_thread(libsql: LibSQLStore) -> None:
    recall, _, caller = await recall_setup(libsql)
    asking = Caller(caller.thread, "r", frozenset({"m28"}))  # m28 is the message this turn answers
    end = await call(recall, asking, anchor="end", limit=2)
    assert shown_ids(end) == ["m27", "m29"] and end["count"] == 2 and "threadId" not in end
    forward = await call(recall, asking, cursor="m26")
    assert shown_ids(forward) == ["m27", "m29"] and "threadId" not in forward
    other = await call(recall, asking, cursor="u1", page=-1)
    assert other["threadId"] == "u"


@anyio
async def test_low_detail_cuts_parts_with_a_hint_and_a_page_stays_within_its_budget(libsql: LibSQLStore) -> None:
    recall, _, caller = await recall_setup(libsql)
    page = await call(recall, caller, cursor="m11", limit=1)
    [line] = [ln for ln in page["messages"].split("\n") if ln.startswith("  [p0]")]
    assert line.endswith('… [recall cursor="m12" partIndex=0 detail="high" for more]')  # user text, cut at 200
    assert page["truncated"] is False
    tools = await call(recall, caller, cursor="m14", limit=1)
    assert "[p1] [Tool Result: calculator]" in tools["messages"]
    only_tools = await call(recall, caller, cursor="m00", partType="tool-result", toolName="calculator")
    assert shown_ids(only_tools) == ["m15"] and "[p0]" not in only_tools["messages"]
    assert shown_ids(await call(recall, caller, cursor="m00", toolName="search")) == []
    full = await call(recall, caller, cursor="m15", limit=10)  # ten messages, one of them 3,000 words
    assert full["truncated"] is False and "partIndex=0 detail=\"high\" for more" in full["messages"]
    budget = await call(recall, caller, cursor="m12", detail="high")
    assert budget["truncated"] is False and "next message" in budget["messages"]
    huge = await call(recall, caller, cursor="m19", detail="high")
    assert shown_ids(huge) == ["m20"] and huge["truncated"] is True and huge["tokenOffset"] > 0
    assert 'charOffset=0 (then follow nextCharOffset)' in huge["messages"]


@anyio
async def test_one_part_is_read_whole_in_chunks_by_char_offset(libsql: LibSQLStore) -> None:
    recall, _, caller = await recall_setup(libsql)
    result = await call(recall, caller, cursor="m15", partIndex=1)
    assert result["type"] == "tool-result" and '"result": 42' in result["text"] and result["truncated"] is False
    chunks, offset = [], 0
    while True:
        chunk = await call(recall, caller, cursor="m20", partIndex=0, charOffset=offset)
        assert chunk["charOffset"] == offset and chunk["messageId"] == "m20" and chunk["role"] == "user"
        chunks.append(chunk["text"])
        if "nextCharOffset" not in chunk:
            assert chunk["truncated"] is False
            break
        assert chunk["truncated"] is True and f'charOffset={chunk["nextCharOffset"]}' in chunk["note"]
        offset = chunk["nextCharOffset"]
    assert len(chunks) >= 2 and "".join(chunks) == LONG
    assert "no part 5" in (await call(recall, caller, cursor="m15", partIndex=5))["error"]
    assert "past the end" in (await call(recall, caller, cursor="m15", partIndex=0, charOffset=10_000))["error"]
    assert "need a cursor" in (await call(recall, caller, partIndex=0))["error"]


@anyio
async def test_threads_lists_the_resources_threads_with_the_current_one_marked(libsql: LibSQLStore) -> None:
    recall, _, caller = await recall_setup(libsql)
    listed = await call(recall, caller, mode="threads")
    assert listed["count"] == 3 and listed["hasMore"] is False and listed["page"] == 0
    assert "- **About t** ← current\n  id: t\n  updated: " in listed["threads"]
    assert "id: u" in listed["threads"] and "id: v" in listed["threads"] and "id: x" not in listed["threads"]
    first = await call(recall, caller, mode="threads", limit=2)
    second = await call(recall, caller, mode="threads", limit=2, page=1)
    assert (first["count"], first["hasMore"], second["count"], second["hasMore"]) == (2, True, 1, False)
    assert (await call(recall, caller, mode="threads", before="2000-01-01"))["count"] == 0
    assert (await call(recall, caller, mode="threads", after="2000-01-01"))["count"] == 3
    assert "not a date" in (await call(recall, caller, mode="threads", before="last week"))["error"]
    other = await call(recall, caller, threadId="u")
    assert shown_ids(other) == ["u1"] and other["threadId"] == "u"


@anyio
async def test_search_finds_keywords_across_the_resource_and_reports_the_group(libsql: LibSQLStore) -> None:
    recall, _, caller = await recall_setup(libsql)
    found = await call(recall, caller, mode="search", query="Alps hiking")
    assert found["count"] == 1 and found["searchMode"] == "keyword" and "note" not in found
    assert "- thread: u (About u)" in found["results"] and "Secret" not in found["results"]
    grouped = await call(recall, caller, mode="search", query="Message 3 about")
    group = parse_groups((await recall.engine.records.active("thread:t")).active_observations)[0]
    assert f"- observation group: {group.id}" in grouped["results"] and "range `m00:m09`" in grouped["results"]
    assert "- thread: t (About t) ← current" in grouped["results"] and "- score: 1.00" in grouped["results"]
    unobserved = await call(recall, caller, mode="search", query="Message 25 about")
    # no group covers it yet
    assert unobserved["count"] == 1 and "source: message m25 (assistant" in unobserved["results"]
    assert (await call(recall, caller, mode="search", query="zeppelin"))["count"] == 0
    assert "needs a query" in (await call(recall, caller, mode="search"))["error"]
    # the turn's own question is not a hit for itself
    asking = Caller(caller.thread, "r", frozenset({"u1"}))
    assert (await recall.run(RecallInput(mode="search", query="Alps hiking"), asking))["count"] == 0


@anyio
async def test_search_by_meaning_falls_back_to_keywords_when_unavailable(libsql: LibSQLStore) -> None:
    recall, _, caller = await recall_setup(libsql, vector=True)  # a memory without an embedder
    found = await call(recall, caller, mode="search", query="Alps hiking")
    assert found["searchMode"] == "keyword" and found["count"] == 1
    assert "Search by meaning is unavailable" in found["note"]


@anyio
async def test_thread_scope_reads_the_current_thread_only(libsql: LibSQLStore) -> None:
    recall, _, caller = await recall_setup(libsql, scope="thread")
    assert shown_ids(await call(recall, caller, cursor="m00", limit=1)) == ["m01"]
    refused = await call(recall, caller, cursor="u1")
    assert "limited to the current thread" in refused["error"] and "Alps" not in json.dumps(refused)
    assert "limited to the current thread" in (await call(recall, caller, threadId="u"))["error"]
    assert "limited to the current thread" in (await call(recall, caller, mode="threads", threadId="u"))["note"]
    listed = await call(recall, caller, mode="threads")
    assert listed["count"] == 1 and "← current" in listed["threads"] and "id: u" not in listed["threads"]
    searched = await call(recall, caller, mode="search", query="Alps hiking")
    assert searched["count"] == 0
    assert (await call(recall, caller, mode="search", query="Message 3 about"))["count"] == 1
    assert "threadId" not in await call(recall, caller, threadId="current", limit=1)


@anyio
async def test_another_resources_thread_or_cursor_reads_as_not_found(libsql: LibSQLStore) -> None:
    recall, _, caller = await recall_setup(libsql)
    assert (await call(recall, caller, cursor="x1"))["error"] == 'Could not find message "x1".'
    assert (await call(recall, caller, cursor="nope"))["error"] == 'Could not find message "nope".'
    assert (await call(recall, caller, cursor="x1", partIndex=0))["error"] == 'Could not find message "x1".'
    assert "was not found" in (await call(recall, caller, threadId="x"))["error"]
    assert "was not found" in (await call(recall, caller, threadId="x", mode="search", query="Alps"))["error"]
    assert "not in thread" in (await call(recall, caller, threadId="u", cursor="m03"))["error"]
    # a cursor of another thread of the same resource pages in that thread
    assert shown_ids(await call(recall, caller, cursor="u1", page=-1)) == []


# -- through a live gateway ----------------------------------------------------------------


def tool_result(text: str) -> dict[str, Any]:
    assert "The recall tool returned: " in text, text
    return json.loads(text.split("The recall tool returned: ", 1)[1].rstrip("."))


def test_the_model_calls_recall_in_a_real_turn_and_reads_what_was_observed(tmp_path: Path) -> None:
    options = {"retrieval": True, "observation": {"messageTokens": 300, "bufferTokens": False},
               "reflection": {"observationTokens": 5000}}
    with serve("gateway", tmp_path, inprocess=True, settings={"telemetry": False, "om_options": options}) as server:
        results = [turn(server, "trip", f"t{i}", f"Turn {i}. {FACT}") for i in range(1, 6)]
        assert any(c["type"] == "data-om-observation-end" for r in results for c in r["chunks"])
        with sqlite3.connect(tmp_path / "dev-server.db") as conn:
            [(log,)] = conn.execute("SELECT active_observations FROM mastra_observational_memory"
                                    " WHERE lookup_key = 'thread:trip'").fetchall()
        group = parse_groups(log)[0]
        assert group.start == "t1" and HEX16.match(group.id)  # the first user message of the thread
        listed = tool_result(reply_text(turn(server, "trip", "t-threads", 'call recall with {"mode": "threads"}')))
        assert listed["count"] == 1 and "id: trip" in listed["threads"] and "← current" in listed["threads"]
        paged = tool_result(reply_text(turn(server, "trip", "t-page", 'call recall with {"cursor": "t1", "limit": 2}')))
        assert paged["count"] == 2 and "[t2]:" in paged["messages"] and "Turn 2." in paged["messages"]


@anyio
async def test_search_by_meaning_reports_the_group_holding_each_hit(libsql: LibSQLStore) -> None:
    from dev_server.llm.embeddings import local_embedder
    from dev_server.memory.vector_search import VectorSearch
    from dev_server.recall.service import SemanticIndex

    texts = ["The weather was grey all week.", FACT, "Our kettle broke again.", "Football on Sunday.",
             "I repainted the kitchen.", "Dinner was pasta."]
    messages = [stored_text(f"m{i}", "user" if i % 2 == 0 else "assistant", text, i) for i, text in enumerate(texts)]
    memory, engine, ctx = await om_setup(libsql, messages, {"retrieval": {"vector": True}}, agent_id="chat-agent")
    record = await engine.records.initialize(scope="thread", thread_id="t", resource_id="r", config={},
                                             timezone="UTC")
    record = await engine.observe(ctx, record, messages[:3], 500)
    index = SemanticIndex(libsql, local_embedder(), agents=frozenset({"chat-agent"}))
    try:
        await index.start()
        assert await index.ready()
        await index.indexer.settled()
        recall = Recall(memory.store, VectorSearch(index), engine, engine.options.retrieval)
        found = await recall.run(RecallInput(mode="search", query="mountain holiday with the children", limit=1),
                                 Caller(await memory.store.get_thread("t"), "r"))
    finally:
        await index.stop()
    [group] = parse_groups(record.active_observations)
    assert found["searchMode"] == "vector" and found["count"] == 1 and "note" not in found
    assert f"- observation group: {group.id}" in found["results"] and "range `m0:m2`" in found["results"]
    assert "Alps" in found["results"] and re.search(r"- score: 0\.\d\d", found["results"])

@anyio
async def test_resource_scope_keeps_a_group_per_thread_and_search_finds_it(libsql: LibSQLStore) -> None:
    from dev_server.om.engine.resource import observe_resource

    trip = [stored_text("a1", "user", FACT, 1, thread="trip"), stored_text("a2", "assistant", "Lovely.", 2,
                                                                             thread="trip")]
    chores = [stored_text("b1", "user", "Remind me to water the ferns on Friday.", 3, thread="chores")]
    memory, engine, ctx = await om_setup(libsql, trip + chores, {"scope": "resource", "retrieval": True})
    record = await engine.records.initialize(scope="resource", thread_id=None, resource_id="r", config={},
                                             timezone="UTC")
    observed = await observe_resource(engine, ctx, record, {"trip": trip, "chores": chores})
    log = observed.active_observations
    assert re.search(r'<thread id="trip">\n<observation-group id="[0-9a-f]{16}" range="a1:a2">', log)
    assert re.search(r'<thread id="chores">\n<observation-group id="[0-9a-f]{16}" range="b1:b1">', log)
    recall = Recall(memory.store, memory.vectors, engine, engine.options.retrieval)
    found = await recall.run(RecallInput(mode="search", query="water the ferns"),
                             Caller(await memory.store.get_thread("trip"), "r"))
    [group] = [g for g in parse_groups(log) if g.range == "b1:b1"]
    assert found["count"] == 1 and f"- observation group: {group.id}" in found["results"]
    assert "- thread: chores (About chores)\n" in found["results"]
