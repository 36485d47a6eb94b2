"""Observational Memory's bookkeeping per step, excluding the model call (issue 11's target:
well under 10 ms), against a plain memory step measured in the same run.

What is timed is what the step loop does before a model call: ``begin_step``, the input
processors and ``messages()`` (``bench/working_memory.py`` times the same way). The model is
never asked: no window here reaches its threshold. Cases, each on a real SQLite file:

* plain: chat-agent's memory without OM, the last-10 history window (the baseline);
* OM, 30k-token window: ~29,500 unobserved tokens in ~300 messages (just under the 30,000
  threshold, so every step counts them all); "cold" messages carry no token estimate yet
  (user messages), "warm" ones carry the estimate a saved reply has;
* OM, 1,000 observed messages: the cursor is past 1,000 messages, ~40 observation lines
  are injected, 10 messages are unobserved;
* OM deciding, 30k-token window, a tool turn: the step has a model client, so OM runs its
  decision order at every step (the threshold is 100,000 tokens here, so nothing reaches it,
  and no background work is queued), and the reply so far grows by a tool call and its
  result per step.

Step 0 reads storage; steps 1-4 carry what step 0 loaded and count only what the reply
added. Run: .venv/bin/python bench/om_step.py [turns]
"""

from __future__ import annotations

import asyncio
import copy
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from dev_server.kernel.clock import to_iso  # noqa: E402
from dev_server.kernel.messages import Message  # noqa: E402
from dev_server.kernel.processors import StepContext, TurnProcessors, start_turn  # noqa: E402
from dev_server.llm.scripted import ScriptedModel  # noqa: E402
from dev_server.memory.memory import Memory, MemoryOptions  # noqa: E402
from dev_server.om.engine.record_store import om_record_store  # noqa: E402
from dev_server.om.tokens.counting import count_message, count_messages  # noqa: E402
from dev_server.storage.conversations import ConversationStore  # noqa: E402
from dev_server.storage.libsql import LibSQLStore  # noqa: E402
from dev_server.storage.om_records import OMRecordStore  # noqa: E402

STEPS = 5
SENTENCE = ("I would like to plan a trip to Lisbon in the spring with my partner, and we care about food, "
            "walking tours and a quiet hotel near the river. ")


def messages_for(thread_id: str, count: int, words: int, start: datetime) -> list[Message]:
    text = (SENTENCE * (words // 24 + 1))[: words * 6]
    return [Message(f"{thread_id}-m{i}", thread_id, "r1", "user" if i % 2 == 0 else "assistant",
                    {"format": 2, "parts": [{"type": "text", "text": f"({i}) {text}"}], "content": text},
                    to_iso(start + timedelta(seconds=i))) for i in range(count)]


async def seed(store: ConversationStore, records: OMRecordStore) -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    for thread_id in ("plain", "cold", "warm", "observed"):
        await store.ensure_thread(thread_id, "r1", agent_id="chat-agent")
    window = messages_for("cold", 300, 70, start)
    tokens = count_messages(copy.deepcopy(window))
    while tokens >= 29_800:
        window.pop(0)
        tokens = count_messages(copy.deepcopy(window))
    await store.append_messages("cold", window)
    warm = [Message(m.id.replace("cold", "warm"), "warm", m.resource_id, m.role, copy.deepcopy(m.content),
                    m.created_at) for m in window]
    for message in warm:
        count_message(message)  # the estimate a saved reply carries
    await store.append_messages("warm", warm)
    await store.append_messages("plain", messages_for("plain", 300, 70, start))
    old = messages_for("observed", 1010, 70, start)
    await store.append_messages("observed", old)
    record = await records.initialize(scope="thread", thread_id="observed", resource_id="r1", config={},
                                      timezone="UTC")
    lines = "\n".join(f"* 🔴 (10:{i % 60:02d}) User stated they want detail number {i} for the trip" for i in range(40))
    await records.update_active_observations(record.id, observations=f"Date: Jan 1, 2026\n{lines}", token_count=900,
                                             last_observed_at=old[999].created_at,
                                             observed_ids=[m.id for m in old[:1000]])
    print(f"30k window: {len(window)} messages, {tokens} tokens; observed thread: 1000 observed + 10 new")


class ToolTurnReply:
    """The reply so far of a tool turn (``StepContext.reply``): a call and its result per step."""

    def __init__(self, thread_id: str) -> None:
        self.thread_id = thread_id
        self.parts: list[dict] = []

    def grow(self, index: int) -> None:
        if self.parts:
            self.parts.append({"type": "step-start"})
        self.parts.append({"type": "tool-invocation", "toolInvocation": {
            "state": "result", "toolCallId": f"call-{index}", "toolName": "lookup", "args": {"q": SENTENCE[:40]},
            "result": {"hits": [SENTENCE] * 3}}})

    def message(self) -> Message:
        return Message("reply", self.thread_id, "r1", "assistant", {"format": 2, "parts": list(self.parts)},
                       to_iso(datetime.now(UTC)))

    async def split(self) -> None:
        return None


async def timed_turn(memory: Memory, thread, samples: dict[str, list[float]], decide: Any = None) -> None:
    """``decide``: a model client, so OM runs its decisions at every step of a tool turn."""
    step = StepContext("chat-agent", "run", "You are a helpful assistant.", thread=thread, resource_id="r1",
                       llm=decide, model=await decide.resolve("openai/gpt-4o-mini") if decide else None)
    reply = step.reply = ToolTurnReply(thread.id) if decide else None
    processors = TurnProcessors(start_turn(memory.processors, step))
    for index in range(STEPS):
        started = time.perf_counter()
        step.begin_step(index)
        await processors.before_step(step)
        step.messages()
        step.take_emitted()
        samples["first" if index == 0 else "later"].append(time.perf_counter() - started)
        if reply is not None:
            reply.grow(index)


def p50(values: list[float]) -> float:
    return sorted(values)[len(values) // 2] * 1000


async def main(turns: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        db = LibSQLStore(f"file:{Path(tmp) / 'bench.db'}")
        await db.open()
        store, records = ConversationStore(db), om_record_store(db)
        await seed(store, records)
        plain = Memory(MemoryOptions(last_messages=10), store, agent_id="chat-agent", agent_resource="ai-chat")
        om = Memory(MemoryOptions(last_messages=10, observational_memory=True), store, agent_id="chat-agent",
                    agent_resource="ai-chat")
        deciding = Memory(MemoryOptions(last_messages=10, observational_memory={"observation": {
            "messageTokens": 100_000}}), store, agent_id="chat-agent", agent_resource="ai-chat")
        llm = ScriptedModel()  # never asked: nothing reaches a threshold
        cases = {"plain (last 10)": (plain, "plain", None), "OM 30k window, cold": (om, "cold", None),
                 "OM 30k window, warm": (om, "warm", None), "OM 1,000 observed": (om, "observed", None),
                 "OM deciding, tool turn": (deciding, "warm", llm)}
        threads = {name: await store.get_thread(thread_id) for name, (_, thread_id, _) in cases.items()}
        runs = {name: {"first": [], "later": []} for name in cases}
        for _ in range(3):  # warm-up
            for name, (memory, _, decide) in cases.items():
                await timed_turn(memory, threads[name], {"first": [], "later": []}, decide)
        for _ in range(turns):  # interleaved, so drift hits every case alike
            for name, (memory, _, decide) in cases.items():
                await timed_turn(memory, threads[name], runs[name], decide)
        await db.close()
    base = runs["plain (last 10)"]
    print(f"turns={turns} x {STEPS} steps; p50 ms per step, ratio to the plain memory step of the same run")
    for name, samples in runs.items():
        print(f"{name:22s} step 0 {p50(samples['first']):7.2f} ms ({p50(samples['first']) / p50(base['first']):5.1f}x)"
              f"   steps 1-4 {p50(samples['later']):6.3f} ms ({p50(samples['later']) / p50(base['later']):5.1f}x)")


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 30))
