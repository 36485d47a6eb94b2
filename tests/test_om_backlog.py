"""Issue 31, item 1: an imported backlog is observed in bounded batches
(docs/observational-memory.md#backlog, D52, D53).

A thread gets 6,000 messages from another connection (as the Studio's save-messages saves
them), then turns through a gateway in this process (real uvicorn, a real SQLite file, the
scripted model at the provider seam):

* the first turn observes one batch synchronously, the oldest messages up to
  ``maxTokensPerBatch``, and the actor sees the log, the newest messages below the threshold
  and its input, none of the messages still waiting;
* a turn while the catch-up works observes nothing itself and does not wait;
* the catch-up then observes the rest batch by batch in the background, up to the newest
  message the first turn saw: every imported message is observed, none twice, and the
  record lists none of them as observed ids (the cursor covers them).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
import threading
from datetime import timedelta
from pathlib import Path

from dev_server.agents import chat_agent
from dev_server.agents.definition import AgentDefinition
from dev_server.kernel.clock import ManualClock, to_iso
from dev_server.kernel.messages import Message, Thread
from dev_server.kernel.model import ModelRequest
from dev_server.llm.scripted import Reply, ScriptedModel
from dev_server.memory.options import MemoryOptions
from dev_server.storage.conversations import ConversationStore
from dev_server.storage.libsql import LibSQLStore
from tests.kit.chat import turn
from tests.kit.local_http import background_idle
from tests.kit.om import parts, pending, record_row, stored_messages
from tests.kit.servers import serve
from tests.support import wait_until

THREAD = "imported"
IMPORTED = 6_000
THRESHOLD = 2_000
BATCH = 4_000
OPTIONS = {"observation": {"messageTokens": THRESHOLD, "maxTokensPerBatch": BATCH},
           "reflection": {"observationTokens": 1_000_000}}
MARK = re.compile(r"\(message (\d+)\)")


def agent() -> AgentDefinition:
    return dataclasses.replace(chat_agent.definition, tools=(),
                               memory=lambda: MemoryOptions(observational_memory=OPTIONS))


def import_backlog(db: Path, clock: ManualClock) -> None:
    """``IMPORTED`` messages, user and assistant in turn, one a minute until an hour ago."""
    start = clock.now() - timedelta(minutes=IMPORTED + 60)

    async def write() -> None:
        store = LibSQLStore(f"file:{db}")
        await store.open()
        try:
            thread = Thread(THREAD, "ai-chat", "", None, agent_id="chat-agent")
            messages = []
            for index in range(IMPORTED):
                text = f"(message {index}) " + ("I keep bees on the roof." if index % 2 == 0 else "Noted, bees.")
                messages.append(Message(f"imp-{index}", THREAD, "ai-chat", "user" if index % 2 == 0 else "assistant",
                                        {"format": 2, "parts": [{"type": "text", "text": text}], "content": text},
                                        to_iso(start + timedelta(minutes=index))))
            await ConversationStore(store).save_messages([thread], messages)
        finally:
            await store.close()

    asyncio.run(write())


class Observer:
    """The observer at the seam: notes which imported messages each call saw (``failed``: the
    calls it failed); every call after the first (the catch-up's) waits while ``gate`` is
    closed; the calls numbered in ``fail`` fail as a provider fails."""

    def __init__(self, fail: tuple[int, ...] = ()) -> None:
        self.gate = threading.Event()
        self.seen: list[list[int]] = []
        self.fail = fail
        self.failed: list[int] = []

    async def __call__(self, request: ModelRequest) -> str | Reply:
        seen = [int(i) for i in MARK.findall(json.dumps(request.messages[-1]))]
        self.seen.append(seen)
        while len(self.seen) > 1 and not self.gate.is_set():
            await asyncio.sleep(0.01)
        if len(self.seen) in self.fail:
            self.failed.append(len(self.seen) - 1)
            return Reply(error="provider")
        return (f"<observations>\nDate: Jan 5, 2026\n* 🟡 (09:00) User talked about bees "
                f"(messages {min(seen, default=-1)} to {max(seen, default=-1)}).\n</observations>")


def test_an_imported_backlog_is_observed_one_batch_per_turn_then_caught_up_in_the_background(tmp_path: Path) -> None:
    clock = ManualClock("2026-01-05T09:00:00.000Z", tick=timedelta(milliseconds=1))
    observer = Observer()
    llm = ScriptedModel([f"Reply {i}." for i in range(3)], observer=observer)
    with serve("gateway", tmp_path, inprocess=True, settings={"telemetry": False, "om_agents": ""}, llm=llm,
               agents=(agent(),), clock=clock) as server:
        import_backlog(tmp_path / "dev-server.db", clock)

        first = turn(server, THREAD, "u1", "(turn 1) What do I keep on the roof?")
        [end] = parts(first, "observation-end")
        assert end["tokensObserved"] <= BATCH
        batch = observer.seen[0]
        assert batch == list(range(len(batch))) and 100 < len(batch) < IMPORTED / 10  # the oldest, one batch
        [actor] = [json.dumps(r.messages) for r in llm.requests_for("agent")]
        shown = {int(i) for i in MARK.findall(actor)}
        assert IMPORTED - 1 in shown and "(turn 1)" in actor
        assert min(shown) > IMPORTED - THRESHOLD / 5  # only the newest: nothing of the waiting middle
        assert pending(first) < THRESHOLD

        second = turn(server, THREAD, "u2", "(turn 2) And what else?")  # the catch-up waits at the gate
        assert not parts(second, "observation-start") and not parts(second, "buffering-start")
        assert pending(second) < THRESHOLD
        # the catch-up queued by turn 1 reaches the gate in the background
        wait_until(lambda: len(observer.seen) >= 2, poll_s=0.02, seen=lambda: observer.seen)
        assert len(observer.seen) == 2  # the turn observed nothing itself: the catch-up waits at the gate

        observer.gate.set()
        background_idle(server.url, timeout=60, quiet_polls=2)
        record = record_row(tmp_path / "dev-server.db", THREAD)
        caught_up = [index for call in observer.seen for index in call]
        third = turn(server, THREAD, "u3", "(turn 3) Thanks.")
        assert not parts(third, "observation-start") and pending(third) < THRESHOLD
        background_idle(server.url, timeout=60, quiet_polls=2)

    seen = [index for call in observer.seen for index in call]  # turn 3's buffering included
    assert len(seen) == len(set(seen))  # nothing observed twice
    assert sorted(caught_up) == list(range(IMPORTED))  # and nothing left: all of it, batch by batch
    assert len(observer.seen) > IMPORTED * 10 / BATCH
    turn_one = next(m for m in stored_messages(tmp_path / "dev-server.db", THREAD) if m.id == "u1")
    assert record["last_observed_at"] == turn_one.created_at  # up to the newest message the first turn saw
    assert json.loads(record["observed_message_ids"] or "[]") == []  # the cursor says it: no id list to carry
    assert pending(third) < THRESHOLD / 5  # nothing of the backlog pending: the turns since


def test_a_failed_catch_up_batch_is_taken_up_again_by_the_next_turn(tmp_path: Path) -> None:
    clock = ManualClock("2026-01-05T09:00:00.000Z", tick=timedelta(milliseconds=1))
    observer = Observer(fail=(2,))  # the catch-up's first batch fails
    observer.gate.set()
    llm = ScriptedModel([f"Reply {i}." for i in range(3)], observer=observer)
    with serve("gateway", tmp_path, inprocess=True, settings={"telemetry": False, "om_agents": ""}, llm=llm,
               agents=(agent(),), clock=clock) as server:
        import_backlog(tmp_path / "dev-server.db", clock)
        turn(server, THREAD, "u1", "(turn 1) What do I keep on the roof?")
        background_idle(server.url, timeout=60, quiet_polls=2)
        assert len(observer.seen) == 2 and observer.failed == [1]  # the chain ended with the failure
        second = turn(server, THREAD, "u2", "(turn 2) And what else?")
        assert len(parts(second, "observation-end")) == 1  # one batch, taken up by the turn
        background_idle(server.url, timeout=60, quiet_polls=2)
        record = record_row(tmp_path / "dev-server.db", THREAD)

    kept = [call for index, call in enumerate(observer.seen) if index not in observer.failed]
    seen = [index for call in kept for index in call]
    assert sorted(seen) == list(range(IMPORTED))  # all of it once: the failed batch again, nothing else twice
    turn_two = next(m for m in stored_messages(tmp_path / "dev-server.db", THREAD) if m.id == "u2")
    assert record["last_observed_at"] == turn_two.created_at
