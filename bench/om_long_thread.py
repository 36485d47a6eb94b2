"""One thread, 2,000 turns, Observational Memory at its defaults: does a turn stay as cheap,
and the model's context as small, at turn 2,000 as at turn 10?

chat-agent's memory as the gateway builds it (``Settings`` defaults: messageTokens 30,000,
observationTokens 40,000, async buffering every 0.2 x 30,000 = 6,000 tokens), its turns
driven in-process (``TurnRunner.prepare`` + ``run``, as ``app.agents.turns`` does, without
HTTP) on a real SQLite file. The built-in local model answers as actor, observer and
reflector (``LiteLLMClient(force_local=True)``: no network). User messages rotate through
20 sentences, each with the turn number, under a new message id.

Per turn:

* time excluding model time: the turn's wall time (prepare + every event of run, the reply
  saved) minus the time spent inside the model client's ``stream`` on the turn's own task
  (the actor's call and any observer/reflector call the turn waits on; ``complete`` reads
  ``stream`` too). Only the time inside the wrapped generator's steps counts as model time,
  not what the consumer does between its events. Buffered observation/reflection jobs run
  on ``BackgroundWork`` workers (other tasks): not model time of the turn, but they share
  the event loop, so a turn that overlaps one pays for it in its own time;
* the context of the actor's step-0 call: ``app.om.tokens.estimate_tokens`` over each
  model message's text content, summed (the instructions and observations included).

At the end: the thread's raw size (``count_messages`` over every stored message, and the
same text estimate as the context), OM's active record (generation = reflections),
``data-om-activation`` parts, and ``BackgroundWork.stats()``.
Results are printed and written to bench/results/<date>-<commit>-om-long-thread[-<turns>].md.
Run: .venv/bin/python bench/om_long_thread.py [turns]   (default 2000)
"""

from __future__ import annotations

import asyncio
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

from app.agents.events import DataPart  # noqa: E402
from app.agents.registry import DEFINITIONS, AgentRegistry  # noqa: E402
from app.agents.runner import TurnRunner  # noqa: E402
from app.background import BackgroundWork  # noqa: E402
from app.clock import now_iso  # noqa: E402
from app.factory import storage_for  # noqa: E402
from app.llm import LiteLLMClient  # noqa: E402
from app.memory.convert import ui_to_stored  # noqa: E402
from app.om.tokens import count_messages, estimate_tokens  # noqa: E402
from app.settings import Settings  # noqa: E402
from app.storage.conversations import ConversationStore  # noqa: E402
from bench.report import commit, machine  # noqa: E402

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


class TimedLLM:
    """Delegates to the real client; times ``stream`` steps run on ``turn_task`` and keeps
    the messages of the turn's first actor call (the one offering tools: step 0)."""

    def __init__(self, real: LiteLLMClient) -> None:
        self._real = real
        self.turn_task: asyncio.Task | None = None
        self.model_s = 0.0
        self.calls: Counter[str] = Counter()  # on the turn: actor / om (observer, reflector)
        self.step0: list[dict[str, Any]] | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def start_turn(self) -> None:
        self.turn_task, self.model_s, self.calls, self.step0 = asyncio.current_task(), 0.0, Counter(), None

    async def stream(self, request: Any):
        on_turn = asyncio.current_task() is self.turn_task
        if on_turn:
            actor = bool(request.tools)
            self.calls["actor" if actor else "om"] += 1
            if actor and self.step0 is None:
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
                    if on_turn:
                        self.model_s += time.perf_counter() - started
                yield event
        finally:
            started = time.perf_counter()
            await inner.aclose()
            if on_turn:
                self.model_s += time.perf_counter() - started


class CountedWork(BackgroundWork):
    """The app's background work, counting what is submitted by kind (the key's prefix)."""

    def __init__(self) -> None:
        super().__init__()
        self.kinds: Counter[str] = Counter()

    def submit(self, key: str, factory: Any) -> bool:
        queued = super().submit(key, factory)
        self.kinds[f"{key.split(':', 1)[0]}{'' if queued else ' (not queued)'}"] += 1
        return queued


class Warnings(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.seen: Counter[str] = Counter()

    def emit(self, record: logging.LogRecord) -> None:
        self.seen[f"{record.levelname} {record.name}: {record.getMessage()[:160]}"] += 1


def text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") for p in content or () if isinstance(p, dict))


def context_tokens(messages: list[dict[str, Any]]) -> int:
    return sum(estimate_tokens(text_of(m.get("content"))) for m in messages)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def run(turns: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    warnings = Warnings()
    logging.getLogger().addHandler(warnings)
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(data_dir=Path(tmp), telemetry=False)
        storage = storage_for("gateway", settings)
        await storage.open()
        llm = TimedLLM(LiteLLMClient(force_local=True))
        await llm.warm_up()  # litellm's import and the tokenizer, as the app's start-up pays them
        background = CountedWork()
        await background.start()
        registry = AgentRegistry(DEFINITIONS, ConversationStore(storage.default), settings.working_memory_agents,
                                 background, settings.observational_memory)
        runner = TurnRunner(llm, agents=registry)
        agent = registry.get("chat-agent")
        assert agent is not None and agent.memory is not None and agent.memory.options.om is not None
        om = agent.memory.options.om
        resource, thread_id = agent.definition.resource, f"om-long-{uuid.uuid4().hex[:8]}"
        rows: list[dict[str, Any]] = []
        started_run = time.perf_counter()
        for index in range(1, turns + 1):
            text = f"(turn {index}) {TOPICS[(index - 1) % len(TOPICS)]}"
            incoming = [ui_to_stored({"id": f"u-{uuid.uuid4()}", "role": "user",
                                      "parts": [{"type": "text", "text": text}]}, thread_id, resource, now_iso())]
            llm.start_turn()
            parts: Counter[str] = Counter()
            pending = None
            started = time.perf_counter()
            turn = await runner.prepare(agent, thread_id=thread_id, resource_id=resource, incoming=incoming,
                                        client_context=[])
            async for event in runner.run(turn):
                if isinstance(event, DataPart):
                    parts[event.name] += 1
                    if event.name == "om-status" and pending is None:
                        pending = event.data["windows"]["active"]["messages"]["tokens"]
            total = time.perf_counter() - started
            assert llm.step0 is not None, f"turn {index}: no actor call"
            rows.append({"turn": index, "total": total, "model": llm.model_s, "own": total - llm.model_s,
                         "context": context_tokens(llm.step0), "messages": len(llm.step0),
                         "pending": pending, "om_calls": llm.calls["om"], "parts": parts})
            if index % 250 == 0:
                print(f"  turn {index}: {time.perf_counter() - started_run:.1f} s so far", flush=True)
        run_s = time.perf_counter() - started_run
        before_drain = background.stats()
        await background.drain(60.0)
        stored = await agent.memory.store.messages_since(thread_id, None)
        row = await storage.default.fetch_one(
            "SELECT * FROM mastra_observational_memory WHERE lookup_key = ? ORDER BY generation_count DESC LIMIT 1",
            (f"thread:{thread_id}",))
        generations = await storage.default.fetch_one(
            "SELECT count(*) FROM mastra_observational_memory WHERE lookup_key = ?", (f"thread:{thread_id}",))
        await storage.close()
    logging.getLogger().removeHandler(warnings)
    record = dict(row) if row is not None else {}
    final = {
        "run_s": run_s, "background_before": before_drain, "kinds": background.kinds, "background": background.stats(), "warnings": warnings.seen,
        "options": (om.observation.message_tokens, om.reflection.observation_tokens, om.observation.buffer_tokens),
        "stored": len(stored), "raw_count": count_messages(stored, cache=False),
        "raw_text": sum(estimate_tokens(text_of(m.content.get("content"))) for m in stored),
        "stored_activations": sum(1 for m in stored for p in m.content.get("parts", [])
                                  if p.get("type") == "data-om-activation"),
        "record": record, "rows_in_table": generations[0] if generations else 0,
        "chunks": len(json.loads(record.get("buffered_observation_chunks") or "[]")),
    }
    return rows, final


def report(turns: int, rows: list[dict[str, Any]], final: dict[str, Any]) -> str:
    def ms(values: list[float]) -> str:
        return f"{pct(values, 0.5) * 1000:.2f}"

    def window_row(label: str, chunk: list[dict[str, Any]]) -> str:
        own = [r["own"] for r in chunk]
        return (f"| {label} | {ms(own)} | {pct(own, 0.9) * 1000:.2f} | {ms([r['model'] for r in chunk])} | "
                f"{ms([r['total'] for r in chunk])} | {int(pct([r['context'] for r in chunk], 0.5)):,} | "
                f"{int(pct([r['pending'] or 0 for r in chunk], 0.5)):,} |")

    first, last = rows[:WINDOW], rows[-WINDOW:]
    ratio = pct([r["own"] for r in last], 0.5) / pct([r["own"] for r in first], 0.5)
    windows = [(f"turns 1-{len(first)}", first)]
    windows += [(f"turns {c - WINDOW + 1}-{c}", rows[c - WINDOW:c]) for c in CHECKPOINTS if WINDOW < c < turns]
    windows.append((f"turns {turns - len(last) + 1}-{turns}", last))
    own_all = [r["own"] for r in rows]
    slowest = sorted(rows, key=lambda r: r["own"], reverse=True)[:5]
    contexts = [r["context"] for r in rows]
    peak = max(rows, key=lambda r: r["context"])
    parts = sum((r["parts"] for r in rows), Counter())
    record, (message_tokens, observation_tokens, buffer_tokens) = final["record"], final["options"]
    context_end = rows[-1]["context"]
    lines = [
        f"# bench/om_long_thread.py {turns}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}", "",
        *(f"- {line}" for line in machine()),
        f"- chat-agent, one thread, {turns} turns; OM messageTokens {message_tokens:,}, observationTokens "
        f"{observation_tokens:,}, bufferTokens {buffer_tokens:,}; local model as actor, observer and reflector",
        f"- run: {final['run_s']:.1f} s for {turns} turns ({final['run_s'] / turns * 1000:.1f} ms/turn wall, "
        "background work included)", "",
        "## Time per turn, excluding model time (ms; median over each 10-turn window)", "",
        "| turns | excl. model p50 | excl. model p90 | model p50 | total p50 | step-0 context tokens | "
        "unobserved tokens |", "|---|---:|---:|---:|---:|---:|---:|",
        *(window_row(label, chunk) for label, chunk in windows), "",
        f"- last/first (median excl. model, last {len(last)} vs first {len(first)} turns): **{ratio:.2f}x**",
        f"- all turns, excl. model: p50 {ms(own_all)}, p90 {pct(own_all, 0.9) * 1000:.2f}, "
        f"p99 {pct(own_all, 0.99) * 1000:.2f}, max {max(own_all) * 1000:.2f}",
        "- slowest turns (excl. model ms; observer/reflector calls the turn made; OM parts it streamed): "
        + "; ".join(f"{r['turn']}: {r['own'] * 1000:.1f} ({r['om_calls']} OM calls; "
                    f"{', '.join(f'{k} x{v}' for k, v in sorted(r['parts'].items()) if k != 'om-status') or '-'})"
                    for r in slowest),
        f"- turns that called the observer/reflector themselves (synchronously): "
        f"{sum(1 for r in rows if r['om_calls'])}", "",
        "## Context sent to the model (step 0, estimate_tokens over each message's text, summed)", "",
        f"- max: {max(contexts):,} tokens (turn {peak['turn']}, {peak['messages']} messages); at the last turn: "
        f"{context_end:,} tokens ({rows[-1]['messages']} messages)",
        f"- whole thread ({final['stored']:,} stored messages): {final['raw_text']:,} tokens by the same estimate; "
        f"{final['raw_count']:,} by count_messages",
        f"- compression at the end (raw / last context, same estimate): **{final['raw_text'] / context_end:.1f}x**", "",
        "## Observational Memory at the end (active row of mastra_observational_memory)", "",
        f"- observation_token_count {record.get('observation_token_count', 0):,}; generation_count "
        f"{record.get('generation_count', 0)} (reflections; {final['rows_in_table']} rows); total_tokens_observed "
        f"{record.get('total_tokens_observed', 0):,}; pending_message_tokens {record.get('pending_message_tokens', 0):,}",
        f"- buffered observation chunks pending: {final['chunks']}; buffered reflection pending: "
        f"{'yes' if record.get('buffered_reflection') else 'no'}",
        f"- activations (data-om-activation): {parts['om-activation']} streamed, {final['stored_activations']} "
        "in stored messages",
        "- OM parts streamed: " + ", ".join(f"{k} x{v}" for k, v in sorted(parts.items())),
        f"- background jobs submitted: {dict(final['kinds'])}; stats before drain: {final['background_before']}; "
        f"after: {final['background']}",
        "- warnings/errors logged: " + ("; ".join(f"{text} (x{n})" for text, n in final["warnings"].most_common(8))
                                        or "none"),
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    turns = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    if turns < WINDOW:
        raise SystemExit(f"at least {WINDOW} turns")
    rows, final = asyncio.run(run(turns))
    text = report(turns, rows, final)
    print(text)
    out = REPO / "bench" / "results" / (f"{time.strftime('%Y-%m-%d', time.gmtime())}-{commit()}-om-long-thread"
                                         f"{'' if turns == 2000 else f'-{turns}'}.md")
    out.write_text(text)
    print(f"written to {out.relative_to(REPO)}")


if __name__ == "__main__":
    main()
