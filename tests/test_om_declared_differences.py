"""Things Mastra 1.31 does that look like defects, and what dev-server does instead
(docs/observational-memory.md#deliberate-differences D38-D40, D49), each checked where it shows:

* D38: a reflection's new generation carries over the record as it is now (the cursor and
  the running total a synchronous observation just moved), not a copy read before it, so no
  turn already observed is observed again;
* D39: a reply observed in part reaches the actor with its unobserved parts only;
* D40: in resource scope the other threads' unobserved messages are counted once, and
  transcribed once, under their own thread;
* D49: after a synchronous observation on a turn's first step, no reply the observation
  covered stays in the actor's context, though it holds an earlier observation's markers.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from dev_server.kernel.messages import Thread
from dev_server.llm.scripted import ScriptedModel
from dev_server.om.engine.record_store import om_record_store
from dev_server.om.engine.resource import other_conversations, other_tokens
from dev_server.om.tokens.counting import count_message, count_messages
from dev_server.storage.conversations import ConversationStore
from dev_server.storage.libsql import LibSQLStore
from tests.kit.chat import turn
from tests.kit.om import FACT, parts, pending, stored_messages
from tests.kit.servers import serve


@pytest.mark.anyio
async def test_a_reflection_carries_over_the_cursor_and_total_the_observation_just_moved(libsql: LibSQLStore) -> None:
    await ConversationStore(libsql).save_thread(Thread("t", "r"))
    records = om_record_store(libsql)
    before = await records.initialize(scope="thread", thread_id="t", resource_id="r", config={}, timezone="UTC")
    observed = await records.update_active_observations(before.id, observations="* 🔴 (10:00) a", token_count=7,
                                                        last_observed_at="2026-01-01T10:00:00.000Z",
                                                        observed_ids=["m1"])
    # Mastra passes the record read before the observation and copies its (older) cursor and total;
    # the new generation here is made from the row as it is when the reflection is stored
    reflected = await records.create_reflection_generation(before, observations="* a", token_count=3)
    assert (before.last_observed_at, before.total_tokens_observed) == (None, 0)
    assert reflected.last_observed_at == observed.last_observed_at == "2026-01-01T10:00:00.000Z"
    assert reflected.total_tokens_observed == observed.total_tokens_observed == 7


def test_a_partly_observed_reply_reaches_the_actor_with_its_unobserved_parts_only(tmp_path: Path) -> None:
    db = tmp_path / "dev-server.db"
    model = ScriptedModel(["Bees like clover. Ferns like shade.", "Noted."])
    with serve("gateway", tmp_path, inprocess=True, llm=model,
               settings={"telemetry": False, "om_options": {"observation": {"bufferTokens": False}}}) as server:
        turn(server, "partly", "p1", "Tell me about bees and ferns.")
        # the reply as a cycle leaves it when it observed its first part only (a completed end
        # marker between the part it observed and the part written after it)
        [reply] = [m for m in stored_messages(db, "partly") if m.role == "assistant"]
        content = {**reply.content, "parts": [
            {"type": "text", "text": "Bees like clover."},
            {"type": "data-om-observation-end", "data": {"cycleId": "c1", "operationType": "observation"}},
            {"type": "text", "text": "Ferns like shade."}]}
        with sqlite3.connect(db) as conn:
            conn.execute("UPDATE messages SET content = ? WHERE id = ?", (json.dumps(content), reply.id))
        turn(server, "partly", "p2", "And which likes shade?")
    sent = model.requests_for("agent")[-1].messages
    assistant = [m["content"] for m in sent if m["role"] == "assistant"]
    assert assistant == ["Ferns like shade."]  # Mastra 1.31 keeps "Bees like clover." in the context too


def test_resource_scope_counts_the_other_threads_twice_as_mastra_but_transcribes_them_once(tmp_path: Path) -> None:
    db = tmp_path / "dev-server.db"
    model = ScriptedModel(["Noted about the plants.", "Noted again.", "Fine."])
    options = {"scope": "resource", "observation": {"messageTokens": 130}}
    with serve("gateway", tmp_path, inprocess=True, llm=model,
               settings={"telemetry": False, "om_options": options}) as server:
        turn(server, "plants", "a1", "Remind me to water the ferns on Friday.")
        chores = turn(server, "chores", "b1", "Also buy clover seeds.")
        own = count_messages([m for m in stored_messages(db, "chores") if m.id == "b1"])
        plants = stored_messages(db, "plants")
        assert len(plants) == 2
        # this thread's window, the other thread's context block and its messages again, as
        # Mastra counts them (D40: the count is followed, the transcript is not)
        context = other_tokens(other_conversations({"plants": plants}, False))
        assert context > 0 and pending(chores) == own + context + sum(count_message(m) for m in plants)
        observed = turn(server, "chores", "b2", f"And one more thing: {FACT} Also: {FACT}")
    assert parts(observed, "observation-end")
    [observer] = model.requests_for("observer")
    history = observer.messages[-1]["content"]
    history = history if isinstance(history, str) else " ".join(p.get("text", "") for p in history)
    assert history.count("Remind me to water the ferns on Friday.") == 1  # under its own thread only
    assert history.count("Also buy clover seeds.") == 1


def test_a_reply_holding_an_earlier_observations_markers_leaves_the_context_once_observed(tmp_path: Path) -> None:
    db = tmp_path / "dev-server.db"
    observer = [f"<observations>\nDate: Jan 1, 2026\n* 🔴 (10:00) User stated fact {i}\n</observations>"
                for i in (1, 2)]
    model = ScriptedModel(["Noted one.", "Noted two."], observer=observer)
    options = {"observation": {"messageTokens": 30, "bufferTokens": False}}
    with serve("gateway", tmp_path, inprocess=True, llm=model,
               settings={"telemetry": False, "om_options": options}) as server:
        first = turn(server, "marked", "m1", FACT)
        second = turn(server, "marked", "m2", FACT.replace("Alps", "Pyrenees"))
    assert len(parts(first, "observation-end")) == len(parts(second, "observation-end")) == 1
    # the first reply opens with its observation's markers and ends with its text: the reply
    # Mastra's cleanup trims to that text and keeps
    [reply, _] = [m for m in stored_messages(db, "marked") if m.role == "assistant"]
    assert [p["type"] for p in reply.content["parts"]] == ["data-om-observation-start", "data-om-observation-end",
                                                            "text"]
    # the second turn's observer read that text, so the second turn's actor gets it from the log only
    assert "Noted one." in str(model.requests_for("observer")[-1].messages[-1]["content"])
    sent = model.requests_for("agent")[-1].messages
    assert [m for m in sent if m["role"] == "assistant"] == []  # Mastra 1.31 still sends "Noted one."
