"""The built-in local observer and reflector on big inputs (issue 31 item 2): do they stay
within a real model's bounds?

A generated conversation (``tests.kit.om.generated_conversation``: user statements,
questions and confirmations, assistant answers of a few sentences, tool calls, a new day
every 200 messages) of about 1 M and 5 M tokens is formatted as Observational Memory formats
it (``format_transcript``) and put to the local model as an observer request
(``compose_reply``, the whole call: reading, answering and counting the usage). Then the
reflector gets a generated log of about 120 k and 620 k tokens (``tests.kit.om.generated_log``: dated
groups, every priority, tool calls under their task with ✅ outcomes) at every compression
level, against the default reflection threshold of 40,000 tokens. Last, OM's engine runs 30
observation cycles of 1,000 messages each with the local model, reflecting at the default
threshold: how big the active log gets. Tokens are the engine's estimate (``estimate_tokens``);
times are the best of a few calls.

Run: .venv/bin/python bench/local_om.py [max-tokens]   (default 5000000; 1000000 is quicker)
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import dev_server  # noqa: E402
from bench.report import machine  # noqa: E402
from dev_server.kernel.messages import Thread  # noqa: E402
from dev_server.llm import LiteLLMClient  # noqa: E402
from dev_server.llm.local_model import compose_reply  # noqa: E402
from dev_server.om.engine.cycle_context import CycleContext  # noqa: E402
from dev_server.om.engine.observation_engine import ObservationEngine  # noqa: E402
from dev_server.om.engine.record_store import om_record_store  # noqa: E402
from dev_server.om.options.config import observational_memory_options  # noqa: E402
from dev_server.om.prompting.parsing import parse_observer_output, parse_reflector_output  # noqa: E402
from dev_server.om.prompting.prompts import (  # noqa: E402
    observer_messages,
    observer_system_prompt,
    reflector_messages,
    reflector_system_prompt,
)
from dev_server.om.prompting.transcript import format_transcript  # noqa: E402
from dev_server.om.tokens.counting import count_messages, estimate_tokens  # noqa: E402
from dev_server.storage.conversations import ConversationStore  # noqa: E402
from dev_server.storage.libsql import LibSQLStore  # noqa: E402
from tests.kit.om import generated_conversation, generated_log  # noqa: E402

THRESHOLD = 40_000
LOG_LINES = (5_000, 26_000)  # ~120k tokens; ~620k, what the unbounded observer wrote for 5M


def best(call: Callable[[], Any], runs: int) -> tuple[float, Any]:
    times, result = [], None
    for _ in range(runs):
        started = time.perf_counter()
        result = call()
        times.append(time.perf_counter() - started)
    return min(times), result


def observer_request(transcript: str) -> list[dict[str, Any]]:
    return [{"role": "system", "content": observer_system_prompt()},
            *observer_messages(transcript, previous_observations=None, prior_current_task=None,
                               prior_suggested_response=None)]


def main() -> None:
    top = int(sys.argv[1]) if len(sys.argv) > 1 else 5_000_000
    print("# Local observer and reflector on big inputs\n")
    print("\n".join(f"- {line}" for line in machine()))
    print(f"- dev_server from: {Path(dev_server.__file__).parent}\n- load average at start: {os.getloadavg()[0]:.2f}\n")
    run(top, echo=True)
    print(f"\n(load average at end: {os.getloadavg()[0]:.2f})")


def run(top: int, echo: bool = False) -> tuple[list[str], dict[str, Any]]:
    """The tables' lines (each printed as it comes with ``echo``) and the figures: per observer
    input (input tokens, output tokens), per reflector input (input tokens, output tokens per
    level), and the cycles' largest active log, threshold and reflections."""
    lines: list[str] = []
    found: dict[str, Any] = {"observer": [], "reflector": []}

    def out(*texts: str) -> None:
        for text in texts:
            lines.extend(text.split("\n"))
            if echo:
                print(text, flush=True)

    compose_reply(observer_request("Dec 4 2025:\nUser (9:00 AM): warm up"))  # tiktoken's load is not a call's
    out("| observer input | input tokens | output tokens | output / input | time per call |", "|---|---|---|---|---|")
    for tokens in (t for t in (100_000, 1_000_000, 5_000_000) if t <= top):
        messages = generated_conversation(tokens // 39)
        transcript, _ = format_transcript(messages, tz=UTC)
        request = observer_request(transcript)
        seconds, reply = best(lambda request=request: compose_reply(request), 1 if tokens > 1_000_000 else 3)
        output, read = estimate_tokens(parse_observer_output(reply.text).observations), estimate_tokens(transcript)
        found["observer"].append((read, output))
        out(f"| {len(messages):,} messages | {read:,} | {output:,} | {output / read:.4f} | {seconds:.2f} s |")
    for log_lines in LOG_LINES:
        log = generated_log(log_lines)
        outputs: list[int] = []
        found["reflector"].append((estimate_tokens(log), outputs))
        out(f"\n| reflector input {estimate_tokens(log):,} tokens, threshold {THRESHOLD:,} | output tokens "
            "| under threshold | time per call |", "|---|---|---|---|")
        for level in range(5):
            request = [{"role": "system", "content": reflector_system_prompt()}, *reflector_messages(log, level=level)]
            seconds, reply = best(lambda request=request: compose_reply(request), 3)
            output = estimate_tokens(parse_reflector_output(reply.text).observations)
            outputs.append(output)
            out(f"| level {level} | {output:,} | {'yes' if output < THRESHOLD else 'no'} | {seconds:.3f} s |")
    found["cycles"] = asyncio.run(cycles(out))
    return lines, found


async def cycles(out: Callable[..., None], count: int = 30, messages: int = 1_000) -> dict[str, int]:
    """Observational Memory's engine at its default reflection threshold on a real SQLite
    file, the local model observing ``messages`` messages (~39k tokens, about Mastra's
    default window of 30k) per cycle and reflecting when the log reaches the threshold."""
    with tempfile.TemporaryDirectory() as folder:
        store = LibSQLStore(f"file:{folder}/om.db")
        await store.open()
        await ConversationStore(store).save_thread(Thread("t", "r"))
        engine = ObservationEngine(observational_memory_options(True), om_record_store(store))
        record = await engine.records.initialize(scope="thread", thread_id="t", resource_id="r", config={},
                                                 timezone="UTC")
        llm = LiteLLMClient(force_local=True)
        ctx = CycleContext(llm, await llm.resolve("openai/gpt-4o-mini"), "t", None, lambda part, durable=False: None)
        sizes, seconds = [], []
        for cycle in range(count):
            batch = generated_conversation(messages, start=cycle * messages)
            started = time.perf_counter()
            observed = await engine.observe(ctx, record, batch, count_messages(batch)) or record
            record = await engine.maybe_reflect(ctx, observed)
            seconds.append(time.perf_counter() - started)
            sizes.append(record.observation_token_count)
        await store.close()
    threshold = engine.options.reflection.observation_tokens
    out(f"\n| {count} cycles of {messages:,} messages, reflection threshold {threshold:,} | figure |", "|---|---|",
        f"| active observations after cycles 1 / 10 / 20 / {count} | "
        f"{' / '.join(f'{sizes[i]:,}' for i in (0, 9, 19, count - 1))} |")
    verdict = "under" if max(sizes) < threshold else "over"
    out(f"| largest after any cycle | {max(sizes):,} ({verdict} the threshold) |",
        f"| reflections (generations) | {record.generation_count} |",
        f"| time per cycle, median / max | {statistics.median(seconds):.2f} s / {max(seconds):.2f} s |")
    return {"largest": max(sizes), "threshold": threshold, "reflections": record.generation_count}


if __name__ == "__main__":
    main()
