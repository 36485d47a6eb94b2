"""One thread, 2,000 turns, Observational Memory at its defaults: does a turn stay as cheap,
and the model's context as small, at turn 2,000 as at turn 10?

chat-agent's memory as the gateway builds it (``Settings`` defaults: messageTokens 30,000,
observationTokens 40,000, async buffering every 0.2 x 30,000 = 6,000 tokens), its turns
driven in-process (``TurnRunner.prepare`` + ``run``, as ``dev_server.agents.turns`` does, without
HTTP) on a real SQLite file, after the server process's warm-up (``dev_server.factory.warm_up``
with ``freeze_heap``). The built-in local model answers as actor, observer and reflector
(``LiteLLMClient(force_local=True)``: no network). User messages rotate through 20
sentences, each with the turn number, under a new message id.

Per turn:

* time excluding model time: the turn's wall time (prepare + every event of run, the reply
  saved) minus the time spent inside the model client's ``stream`` on the turn's own task
  (the actor's call and any observer/reflector call the turn waits on; ``complete`` reads
  ``stream`` too). Only the time inside the wrapped generator's steps counts as model time,
  not what the consumer does between its events. Buffered observation/reflection jobs run
  on ``BackgroundWork`` workers (other tasks): not model time of the turn, but they share
  the event loop, so a turn that overlaps one pays for it in its own time. Garbage
  collector pauses inside the turn are shown apart (they are part of its time);
* the context of the actor's step-0 call: ``dev_server.om.tokens.counting.estimate_tokens`` over each
  model message's text content, summed (the instructions and observations included).

At the end: the thread's raw size (``count_messages`` over every stored message, and the
same text estimate as the context) and its stored bytes by part type, OM's active record
(generation = reflections), ``data-om-activation`` parts, and the background jobs.
Results are printed and written to bench/results/<date>-<commit>-om-long-thread[-<turns>].md.
Run: .venv/bin/python bench/om_long_thread.py [turns]   (default 2000)
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.report import commit, machine  # noqa: E402
from dev_server.agents.registry import DEFINITIONS, AgentRegistry, memory_options  # noqa: E402
from dev_server.agents.runner import TurnRunner  # noqa: E402
from dev_server.api.deps import Readiness  # noqa: E402
from dev_server.background import BackgroundWork  # noqa: E402
from dev_server.factory import memory_settings, storage_for, warm_up  # noqa: E402
from dev_server.kernel.clock import now_iso  # noqa: E402
from dev_server.kernel.convert import ui_to_stored  # noqa: E402
from dev_server.kernel.events import DataPart  # noqa: E402
from dev_server.llm import LiteLLMClient  # noqa: E402
from dev_server.om.tokens.counting import count_messages, estimate_tokens  # noqa: E402
from dev_server.settings import Settings  # noqa: E402
from dev_server.storage.conversations import ConversationStore  # noqa: E402

TOPICS = [
    "I'm planning a trip to Lisbon in April with my partner Ana; we love food markets and long walks.",
    "My sister Clara is getting married in June, and I still need to book a hotel near Porto.",
    "I started learning the cello last month and practise for thirty minutes before work.",
    "Work is busy: I'm leading the migration of our billing system to a new database this quarter.",
    "My dog Pixel needs a vet appointment for her vaccinations sometime next week.",
    "I want to run a half marathon in October, so I'm running three times a week right now.",
    "We're repainting the living room a pale green and replacing the old bookshelf.",
    "My budget for the Lisbon trip is about 2,000 euros, flights included.",
    "I'm allergic to shellfish, so restaurant suggestions need to take that into account.",
    "My manager asked me to present the migration plan to the leadership team on Friday.",
    "I've been reading a novel by Fernando Pessoa to get in the mood for Portugal.",
    "My parents are visiting in May and my dad has trouble with stairs.",
    "I'm thinking about switching to a four-day work week after the billing project ends.",
    "Ana prefers quiet hotels; last time a noisy street ruined our sleep for three nights.",
    "I need to renew my passport before the trip; it expires in August.",
    "My cello teacher suggested a small recital in September, which makes me nervous.",
    "I cook vegetarian on weekdays and try a new recipe every Sunday.",
    "Pixel gets anxious in cars, so long drives with her are hard.",
    "I want to save for a new bike; my current one is twelve years old.",
    "Could you help me put together a packing list for a week in Lisbon in spring?",
]
CHECKPOINTS = (100, 500, 1000, 1500)
WINDOW = 10
OM_ROWS = "SELECT * FROM mastra_observational_memory WHERE lookup_key = ? ORDER BY generation_count"


class TimedLLM:
    """Delegates to the real client; times ``stream`` steps run on ``turn_task`` and keeps
    the messages of the turn's first actor call (the one offering tools: step 0)."""

    def __init__(self, real: LiteLLMClient) -> None:
        self._real = real
        self.turn_task: asyncio.Task | None = None
        self.model_s, self.om_calls, self.step0 = 0.0, 0, None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def start_turn(self) -> None:
        self.turn_task, self.model_s, self.om_calls, self.step0 = asyncio.current_task(), 0.0, 0, None

    async def stream(self, request: Any):
        on_turn = asyncio.current_task() is self.turn_task
        if on_turn and not request.tools:
            self.om_calls += 1  # observer / reflector: the actor's calls offer chat-agent's tools
        elif on_turn and self.step0 is None:
            self.step0 = list(request.messages)
        inner = self._real.stream(request)
        try:
            while True:
                started = time.perf_counter()
                try:
                    event = await anext(inner)
                except StopAsyncIteration:
                    return
                finally:
                    self.model_s += (time.perf_counter() - started) if on_turn else 0.0
                yield event
        finally:
            started = time.perf_counter()
            await inner.aclose()
            self.model_s += (time.perf_counter() - started) if on_turn else 0.0


class Watch(logging.Handler):
    """Warnings and errors logged, and the garbage collector's pauses (seconds, running sum)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.seen: Counter[str] = Counter()
        self.gc_s, self._gc_started = 0.0, 0.0

    def emit(self, record: logging.LogRecord) -> None:
        self.seen[f"{record.levelname} {record.name}: {record.getMessage()[:160]}"] += 1

    def gc_event(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._gc_started = time.perf_counter()
        else:
            self.gc_s += time.perf_counter() - self._gc_started


def text_of(content: Any) -> str:
    return content if isinstance(content, str) else "".join(
        p.get("text", "") for p in content or () if isinstance(p, dict))


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def run(turns: int, watch: Watch) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(data_dir=Path(tmp), telemetry=False)
        storage = storage_for("gateway", settings)
        await storage.open()
        llm = TimedLLM(LiteLLMClient(force_local=True))
        await warm_up(llm, Readiness(), freeze_heap=True)  # as the server process starts
        background = BackgroundWork()
        await background.start()
        memories = memory_options(DEFINITIONS, memory_settings(settings))
        registry = AgentRegistry(DEFINITIONS, ConversationStore(storage.default), memories, background=background)
        runner, agent = TurnRunner(llm, agents=registry), registry.get("chat-agent")
        assert agent is not None and agent.memory is not None and agent.memory.options.om is not None
        resource, thread_id = agent.definition.resource, f"om-long-{uuid.uuid4().hex[:8]}"
        rows: list[dict[str, Any]] = []
        started_run = time.perf_counter()
        for index in range(1, turns + 1):
            text = f"(turn {index}) {TOPICS[(index - 1) % len(TOPICS)]}"
            incoming = [ui_to_stored({"id": f"u-{uuid.uuid4()}", "role": "user",
                                      "parts": [{"type": "text", "text": text}]}, thread_id, resource, now_iso())]
            row: dict[str, Any] = {"turn": index, "parts": Counter(), "failed": []}
            llm.start_turn()
            gc_before, started = watch.gc_s, time.perf_counter()
            turn = await runner.prepare(agent, thread_id=thread_id, resource_id=resource, incoming=incoming,
                                        client_context=[])
            async for event in runner.run(turn):
                if isinstance(event, DataPart):
                    kind = event.data.get("operationType") if event.name == "om-activation" else None
                    row["parts"][f"{event.name} ({kind})" if kind else event.name] += 1
                    if event.name == "om-status" and "pending" not in row:
                        row["pending"] = event.data["windows"]["active"]["messages"]["tokens"]
                        row["generation"] = event.data["generationCount"]
                    elif event.name == "om-observation-failed":
                        row["failed"].append(event.data.get("error", ""))
            total = time.perf_counter() - started
            assert llm.step0 is not None, f"turn {index}: no actor call"
            row.update(total=total, model=llm.model_s, own=total - llm.model_s, gc=watch.gc_s - gc_before,
                       om_calls=llm.om_calls, messages=len(llm.step0),
                       context=sum(estimate_tokens(text_of(m.get("content"))) for m in llm.step0))
            rows.append(row)
            if index % 250 == 0:
                print(f"  turn {index}: {time.perf_counter() - started_run:.1f} s so far", flush=True)
        final: dict[str, Any] = {"run_s": time.perf_counter() - started_run, "before_drain": background.stats()}
        await background.drain(60.0)
        stored = await agent.memory.store.messages_since(thread_id, None)
        generations = [dict(r) for r in await storage.default.fetch_all(OM_ROWS, (f"thread:{thread_id}",))]
        await storage.close()
    om = agent.memory.options.om
    bytes_by_part: Counter[str] = Counter()
    for message in stored:
        for part in message.content.get("parts", []):
            bytes_by_part[part.get("type", "?")] += len(json.dumps(part))
    final.update(
        background=background.stats(), record=generations[-1], generations=len(generations),
        unchanged=sum(1 for a, b in zip(generations, generations[1:], strict=False)
                      if a["active_observations"] == b["active_observations"]),
        options=(om.observation.message_tokens, om.reflection.observation_tokens, om.observation.buffer_tokens),
        stored=len(stored), raw_count=count_messages(stored, cache=False), bytes=bytes_by_part,
        raw_text=sum(estimate_tokens(text_of(m.content.get("content"))) for m in stored),
        stored_activations=sum(1 for m in stored for p in m.content.get("parts", [])
                               if p.get("type") == "data-om-activation"),
        chunks=len(json.loads(generations[-1].get("buffered_observation_chunks") or "[]")))
    return rows, final


def report(turns: int, rows: list[dict[str, Any]], final: dict[str, Any], watch: Watch) -> str:
    def ms(values: list[float], q: float = 0.5) -> str:
        return f"{pct(values, q) * 1000:.2f}"

    def window_row(label: str, chunk: list[dict[str, Any]]) -> str:
        own = [r["own"] for r in chunk]
        per_k = [r["own"] / max(1, r["pending"]) * 1000 for r in chunk]
        return (f"| {label} | {ms(own)} | {ms(own, 0.9)} | {ms([r['gc'] for r in chunk])} | "
                f"{ms([r['model'] for r in chunk])} | {ms([r['total'] for r in chunk])} | "
                f"{int(pct([r['context'] for r in chunk], 0.5)):,} | "
                f"{int(pct([r['pending'] for r in chunk], 0.5)):,} | {ms(per_k)} |")

    first, last = rows[:WINDOW], rows[-WINDOW:]
    ratio = pct([r["own"] for r in last], 0.5) / pct([r["own"] for r in first], 0.5)
    windows = [(f"1-{WINDOW}", first),
               *((f"{c - WINDOW + 1}-{c}", rows[c - WINDOW:c]) for c in CHECKPOINTS if WINDOW < c < turns),
               (f"{turns - WINDOW + 1}-{turns}", last)]
    own_all, contexts = [r["own"] for r in rows], [r["context"] for r in rows]
    slowest = sorted(rows, key=lambda r: r["own"], reverse=True)[:5]
    peak = max(rows, key=lambda r: r["context"])
    parts, failed = sum((r["parts"] for r in rows), Counter()), Counter(e[:90] for r in rows for e in r["failed"])
    block = max(1, turns // 8)
    per_block = [rows[min(i + block, turns) - 1]["generation"] - rows[i]["generation"] for i in range(0, turns, block)]
    record, (message_tokens, observation_tokens, buffer_tokens) = final["record"], final["options"]
    context_end, total_bytes = rows[-1]["context"], sum(final["bytes"].values())
    lines = [
        f"# bench/om_long_thread.py {turns}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}", "",
        *(f"- {line}" for line in machine()),
        f"- chat-agent, one thread, {turns} turns; OM messageTokens {message_tokens:,}, observationTokens "
        f"{observation_tokens:,}, bufferTokens {buffer_tokens:,}; local model as actor, observer and reflector",
        f"- run: {final['run_s']:.1f} s for {turns} turns ({final['run_s'] / turns * 1000:.1f} ms/turn wall, "
        f"background work included); GC pauses inside turns: {sum(r['gc'] for r in rows):.1f} s in all", "",
        "## Time per turn, excluding model time (ms; median over each 10-turn window unless p90)", "",
        "| turns | excl. model p50 | excl. model p90 | of it GC | model | total | step-0 context tokens | "
        "unobserved tokens | excl. model per 1k unobserved |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        *(window_row(label, chunk) for label, chunk in windows), "",
        f"- last/first (median excl. model, last {WINDOW} vs first {WINDOW} turns): **{ratio:.2f}x**",
        f"- all turns, excl. model: p50 {ms(own_all)}, p90 {ms(own_all, 0.9)}, p99 {ms(own_all, 0.99)}, "
        f"max {max(own_all) * 1000:.2f}",
        "- slowest turns (excl. model ms, GC ms, observer/reflector calls on the turn, OM parts): " + "; ".join(
            f"{r['turn']}: {r['own'] * 1000:.0f}, GC {r['gc'] * 1000:.0f}, {r['om_calls']} calls, "
            + (", ".join(f"{k} x{v}" for k, v in sorted(r["parts"].items()) if k != "om-status") or "-")
            for r in slowest),
        f"- turns that ran the observer/reflector themselves: {sum(1 for r in rows if r['om_calls'])}", "",
        "## Context sent to the model (step 0, estimate_tokens over each message's text, summed)", "",
        f"- max: {max(contexts):,} tokens (turn {peak['turn']}, {peak['messages']} messages); at the last turn: "
        f"{context_end:,} tokens ({rows[-1]['messages']} messages)",
        f"- whole thread ({final['stored']:,} stored messages): {final['raw_text']:,} tokens by the same estimate; "
        f"{final['raw_count']:,} by count_messages",
        f"- compression at the end (raw / last context, same estimate): **{final['raw_text'] / context_end:.1f}x**",
        f"- stored message content: {total_bytes / 1e6:.1f} MB, by part type: " + ", ".join(
            f"{k} {v / 1e6:.1f} MB" for k, v in final["bytes"].most_common()), "",
        "## Observational Memory at the end (active row of mastra_observational_memory)", "",
        f"- observation_token_count {record['observation_token_count']:,}; generation_count "
        f"{record['generation_count']} (reflections; {final['generations']} rows, {final['unchanged']} of them with "
        f"the same observations as the generation before); total_tokens_observed {record['total_tokens_observed']:,}; "
        f"pending_message_tokens {record['pending_message_tokens']:,}",
        f"- generations created per {block} turns: {per_block}",
        f"- buffered observation chunks pending: {final['chunks']}; buffered reflection pending: "
        f"{'yes' if record.get('buffered_reflection') else 'no'}",
        f"- activations (data-om-activation): {sum(v for k, v in parts.items() if k.startswith('om-activation'))} "
        f"streamed, {final['stored_activations']} in stored messages",
        "- OM parts streamed: " + ", ".join(f"{k} x{v}" for k, v in sorted(parts.items())),
        "- om-observation-failed errors: " + ("; ".join(f"{e} (x{n})" for e, n in failed.most_common(4)) or "none"),
        f"- background work (BackgroundWork.stats()) before drain: {final['before_drain']}; "
        f"after: {final['background']}",
        "- warnings/errors logged: " + ("; ".join(f"{t} (x{n})" for t, n in watch.seen.most_common(8)) or "none"),
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    turns = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    if turns < WINDOW:
        raise SystemExit(f"at least {WINDOW} turns")
    at_start, watch = commit(), Watch()
    logging.getLogger().addHandler(watch)
    gc.callbacks.append(watch.gc_event)
    rows, final = asyncio.run(run(turns, watch))
    text = report(turns, rows, final, watch)
    if commit() != at_start:
        text += f"\nNote: the checkout changed during the run (commit {at_start} at start).\n"
    print(text)
    out = REPO / "bench" / "results" / (f"{time.strftime('%Y-%m-%d', time.gmtime())}-{at_start}-om-long-thread"
                                        f"{'' if turns == 2000 else f'-{turns}'}.md")
    out.write_text(text)
    print(f"written to {out.relative_to(REPO)}")


if __name__ == "__main__":
    main()
