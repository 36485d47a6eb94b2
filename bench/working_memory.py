"""Cost of the working-memory processor per step, at a 4 KB document.

What is timed is what the step loop does before each model call (``dev_server.kernel.loop``):
``begin_step``, the input processors, ``messages()`` and the tools' litellm specs; the
model is not called. Baseline, measured in the same run: the same steps of chat-agent's
memory without working memory (history window only). Each turn is a fresh
``StepContext`` on a real SQLite file (a thread of 10 messages, a 4 KB resource document)
and runs 5 steps: step 0 reads storage (history, and the document once), steps 1-4 reuse
what step 0 loaded. "After an update" times the step that follows an
``updateWorkingMemory`` call (the system message is rendered again).
Run: .venv/bin/python bench/working_memory.py [turns]
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from dev_server.agents.calculator import calculator  # noqa: E402
from dev_server.kernel.clock import now_iso  # noqa: E402
from dev_server.kernel.messages import Message  # noqa: E402
from dev_server.kernel.processors import StepContext, TurnProcessors, start_turn  # noqa: E402
from dev_server.kernel.tools import ToolContext, execute  # noqa: E402
from dev_server.memory.memory import Memory, MemoryOptions  # noqa: E402
from dev_server.memory.working_document import TOOL_NAME, WorkingMemoryOptions  # noqa: E402
from dev_server.storage.conversations import ConversationStore  # noqa: E402
from dev_server.storage.libsql import LibSQLStore  # noqa: E402

STEPS = 5
DOCUMENT = "# User Information\n" + "".join(f"- **Fact {i}**: the user mentioned detail number {i:04d}\n"
                                            for i in range(80))


async def prepare_step(step: StepContext, processors: TurnProcessors, index: int) -> None:
    step.begin_step(index)
    await processors.before_step(step)
    step.messages()
    [tool.openai_spec() for tool in step.tools.values()]


async def timed_turn(memory: Memory, thread, update_at: int | None, samples: dict[str, list[float]]) -> None:
    step = StepContext("chat-agent", "run", "You are a helpful assistant.", thread=thread, resource_id="r1",
                       agent_tools=(calculator,))
    processors = TurnProcessors(start_turn(memory.processors, step))
    for index in range(STEPS):
        started = time.perf_counter()
        await prepare_step(step, processors, index)
        elapsed = time.perf_counter() - started
        key = "first" if index == 0 else "updated" if update_at is not None and index == update_at + 1 else "later"
        samples[key].append(elapsed)
        if update_at == index:
            outcome = await execute(step.tools, TOOL_NAME, json.dumps({"memory": DOCUMENT}),
                                    ToolContext("call", "chat-agent", "run", thread.id, "r1"))
            assert outcome.error is None, outcome.error


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def main(turns: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        db = LibSQLStore(f"file:{Path(tmp) / 'bench.db'}")
        await db.open()
        store = ConversationStore(db)
        thread = await store.ensure_thread("t1", "r1", agent_id="chat-agent")
        await store.append_messages("t1", [
            Message(f"m{i}", "t1", "r1", "user" if i % 2 == 0 else "assistant",
                    {"format": 2, "parts": [{"type": "text", "text": f"message {i} " + "x" * 200}]}, now_iso())
            for i in range(10)])
        await store.set_working_memory(DOCUMENT, resource_id="r1")
        plain = Memory(MemoryOptions(last_messages=10), store, agent_id="chat-agent", agent_resource="ai-chat")
        working = Memory(MemoryOptions(last_messages=10, working_memory=WorkingMemoryOptions()), store,
                         agent_id="chat-agent", agent_resource="ai-chat")
        runs = {name: {"first": [], "later": [], "updated": []} for name in ("plain", "working", "working+update")}
        for _ in range(20):  # warm-up
            await timed_turn(plain, thread, None, {"first": [], "later": [], "updated": []})
            await timed_turn(working, thread, None, {"first": [], "later": [], "updated": []})
        for _ in range(turns):  # interleaved, so drift hits both alike
            await timed_turn(plain, thread, None, runs["plain"])
            await timed_turn(working, thread, None, runs["working"])
            await timed_turn(working, thread, 1, runs["working+update"])
        await db.close()
    print(f"turns={turns} x {STEPS} steps, document {len(DOCUMENT.encode())} bytes, thread of 10 messages")
    base = runs["plain"]
    rows = [("step 0 (reads storage)", base["first"], runs["working"]["first"]),
            ("steps 1-4 (cached)", base["later"], runs["working"]["later"]),
            ("step after an update", base["later"], runs["working+update"]["updated"])]
    for label, without, with_wm in rows:
        p50a, p99a = pct(without, 0.5) * 1e6, pct(without, 0.99) * 1e6
        p50b, p99b = pct(with_wm, 0.5) * 1e6, pct(with_wm, 0.99) * 1e6
        print(f"{label:24s} without {p50a:8.1f} / {p99a:8.1f} us  with {p50b:8.1f} / {p99b:8.1f} us"
              f"  ratio p50 {p50b / p50a:.2f}  p99 {p99b / p99a:.2f}  (p50 / p99)")
    overhead = statistics.mean(runs['working']['later']) - statistics.mean(base['later'])
    print(f"mean later-step overhead: {overhead * 1e6:.1f} us")


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 400))
