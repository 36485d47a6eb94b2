"""The built-in local observer and reflector on big inputs (issue 31 item 2): do they stay
within a real model's bounds?

A generated conversation (``tests.kit.om.generated_conversation``: user statements,
questions and confirmations, assistant answers of a few sentences, tool calls, a new day
every 200 messages) of about 1 M and 5 M tokens is formatted as Observational Memory formats
it (``format_transcript``) and put to the local model as an observer request
(``compose_reply``, the whole call: reading, answering and counting the usage). Then the
reflector gets a generated log of about 120 k tokens (``tests.kit.om.generated_log``: dated
groups, every priority, tool calls under their task with ✅ outcomes) at every compression
level, against the default reflection threshold of 40,000 tokens. Tokens are the engine's
estimate (``estimate_tokens``); times are the best of a few calls.

Run: .venv/bin/python bench/local_om.py [max-tokens]   (default 5000000; 1000000 is quicker)
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from datetime import UTC
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import dev_server  # noqa: E402
from bench.report import machine  # noqa: E402
from dev_server.llm.local_model import compose_reply  # noqa: E402
from dev_server.llm.tokens import count_tokens  # noqa: E402
from dev_server.om.prompting.parsing import parse_observer_output, parse_reflector_output  # noqa: E402
from dev_server.om.prompting.prompts import (  # noqa: E402
    observer_messages,
    observer_system_prompt,
    reflector_messages,
    reflector_system_prompt,
)
from dev_server.om.prompting.transcript import format_transcript  # noqa: E402
from dev_server.om.tokens.counting import estimate_tokens  # noqa: E402
from tests.kit.om import generated_conversation, generated_log  # noqa: E402

THRESHOLD = 40_000
LOG_LINES = 5_000  # ~120k tokens


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
    compose_reply(observer_request("Dec 4 2025:\nUser (9:00 AM): warm up"))  # tiktoken's load is not a call's
    print("| observer input | input tokens | output tokens | output / input | time per call |")
    print("|---|---|---|---|---|")
    for tokens in (t for t in (100_000, 1_000_000, 5_000_000) if t <= top):
        messages = generated_conversation(tokens // 39)
        transcript, _ = format_transcript(messages, tz=UTC)
        request = observer_request(transcript)
        seconds, reply = best(lambda request=request: compose_reply(request), 1 if tokens > 1_000_000 else 3)
        output, read = estimate_tokens(parse_observer_output(reply.text).observations), estimate_tokens(transcript)
        print(f"| {len(messages):,} messages | {read:,} | {output:,} | {output / read:.4f} | {seconds:.2f} s |",
              flush=True)
    log = generated_log(LOG_LINES)
    log_tokens = estimate_tokens(log)
    print(f"\n| reflector input {log_tokens:,} tokens, threshold {THRESHOLD:,} | output tokens | under threshold "
          "| time per call |")
    print("|---|---|---|---|")
    for level in range(5):
        request = [{"role": "system", "content": reflector_system_prompt()}, *reflector_messages(log, level=level)]
        seconds, reply = best(lambda request=request: compose_reply(request), 3)
        output = estimate_tokens(parse_reflector_output(reply.text).observations)
        print(f"| level {level} | {output:,} | {'yes' if output < THRESHOLD else 'no'} | {seconds:.3f} s |",
              flush=True)
    print(f"\n(tiktoken count of the reflector's input: {count_tokens(log):,}; "
          f"load average at end: {os.getloadavg()[0]:.2f})")


if __name__ == "__main__":
    main()
