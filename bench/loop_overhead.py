"""What the step loop costs per step, the model excluded.

Same run, same client, three shapes of turn:

* ``single``: today's single-call turn: one plain ``llm.stream`` call, read to its finish
  (no loop, no processors, no tools).
* ``loop, 0 tools``: ``dev_server.kernel.loop.run_steps`` over the same client, no tools: one step.
* ``loop, 3 tools``: three tools offered; the model calls all three in step 0 (each tool
  answers at once) and answers in step 1: two steps, so the figure is per step.

The loop runs with the runner's real span hooks on a no-op tracer and the history window as
its input processor over an in-memory context, i.e. what a turn adds around each model call.
The client is either an instant fake (``--client fake``, default: the model costs nothing,
so the difference is the loop) or the built-in local model (``--client local``: the
model path is the real one; its cost (``dev_server.llm.local_model``, tiktoken) dwarfs the loop and
varies with each answer's length, so only the 0-tool line compares like with like there).
p50/p99 per step and their ratio to the single call are printed.
Run: .venv/bin/python bench/loop_overhead.py [iterations] [--client fake|local]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pydantic import BaseModel  # noqa: E402

from dev_server.kernel.loop import ReplyParts, run_steps  # noqa: E402
from dev_server.kernel.model import Finish, ModelRequest, ResolvedModel, TextDelta, ToolCall, Usage  # noqa: E402
from dev_server.kernel.processors import StepContext, TurnProcessor, TurnProcessors  # noqa: E402
from dev_server.kernel.tools import Tool, ToolContext  # noqa: E402

PIECES = tuple(f" word{i}" for i in range(40))  # a 40-piece answer, as a short real reply streams
USER = "use the echo_0 tool: hello"  # what the local model needs to call a tool


class InstantModel:
    """An LLM client whose model answers at once: 3 tool calls when tools are offered and
    none was answered yet, else a 40-piece text."""

    async def resolve(self, mastra_id: str) -> ResolvedModel:
        return ResolvedModel(mastra_id, "bench", "instant", "bench/instant", is_local=True)

    async def stream(self, request: ModelRequest) -> AsyncIterator[TextDelta | ToolCall | Finish]:
        answered = any(m.get("role") == "tool" for m in request.messages)
        if request.tools and not answered:
            for i, spec in enumerate(request.tools):
                yield ToolCall(f"call_{i}", spec["function"]["name"], '{"text": "hello"}')
            yield Finish("tool-calls", Usage(10, 0))
            return
        for piece in PIECES:
            yield TextDelta(piece)
        yield Finish("stop", Usage(10, len(PIECES)))


class EchoInput(BaseModel):
    text: str


async def _echo(args: EchoInput, _: ToolContext) -> dict[str, str]:
    return {"text": args.text}


TOOLS = tuple(Tool(f"echo_{i}", "Echo the text back.", EchoInput, _echo) for i in range(3))


class InMemoryHistory(TurnProcessor):
    """The history window's shape (loaded on the first step) without storage: the loop's cost only."""

    name = "history"

    def __init__(self) -> None:
        self.loaded = False

    async def before_step(self, step: StepContext) -> None:
        if not self.loaded:
            self.loaded = True
            step.history = [{"role": "user", "content": USER}]


async def single_call(llm: Any, model: ResolvedModel) -> int:
    stream = llm.stream(ModelRequest(model=model, messages=[{"role": "system", "content": "bench"},
                                                            {"role": "user", "content": USER}]))
    try:
        async for _ in stream:
            pass
    finally:
        await stream.aclose()
    return 1


async def loop_turn(llm: Any, model: ResolvedModel, tools: tuple[Tool, ...]) -> int:
    from opentelemetry import trace

    from dev_server.agents.runner import _RunSpans

    step = StepContext("bench-agent", "run-1", "bench", thread=None, resource_id=None, agent_tools=tools)
    hooks = _RunSpans(trace.NoOpTracer(), _FakeTurn(), trace.INVALID_SPAN)
    steps = 0
    events = run_steps(llm, model, step, TurnProcessors([InMemoryHistory()]), 5, ReplyParts(), hooks)
    try:
        async for event in events:
            if type(event).__name__ == "StepStart":
                steps += 1
    finally:
        await events.aclose()
    return steps


class _FakeTurn:
    ids: dict[str, str] = {}


async def measure(name: str, run, iterations: int) -> tuple[list[float], int]:
    for _ in range(max(10, iterations // 20)):  # warm up
        await run()
    per_step: list[float] = []
    steps = 0
    for _ in range(iterations):
        started = time.perf_counter()
        steps = await run()
        per_step.append((time.perf_counter() - started) / steps)
    return per_step, steps


def p(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if q < 100 else max(values)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("iterations", nargs="?", type=int, default=2000)
    parser.add_argument("--client", choices=("fake", "local"), default="fake")
    args = parser.parse_args()
    if args.client == "fake":
        llm: Any = InstantModel()
        model = await llm.resolve("bench/instant")
    else:
        from dev_server.llm import LiteLLMClient
        from dev_server.settings import Settings

        llm = LiteLLMClient.from_settings(Settings())
        await llm.warm_up()
        model = await llm.resolve("local/echo")
    iterations = args.iterations if args.client == "fake" else max(50, args.iterations // 10)

    single, _ = await measure("single", lambda: single_call(llm, model), iterations)
    zero, zero_steps = await measure("loop0", lambda: loop_turn(llm, model, ()), iterations)
    three, three_steps = await measure("loop3", lambda: loop_turn(llm, model, TOOLS), iterations)
    base50, base99 = p(single, 50), p(single, 99)
    print(f"client={args.client} iterations={iterations} (times per model call / per step, microseconds)")
    print(f"{'turn':<22}{'steps':>6}{'p50 us':>10}{'p99 us':>10}{'p50 x':>8}{'p99 x':>8}")
    for label, values, steps in (("single call (no loop)", single, 1), ("loop, 0 tools", zero, zero_steps),
                                 ("loop, 3 tools", three, three_steps)):
        p50, p99 = p(values, 50), p(values, 99)
        print(f"{label:<22}{steps:>6}{p50 * 1e6:>10.1f}{p99 * 1e6:>10.1f}{p50 / base50:>8.2f}{p99 / base99:>8.2f}")
    print(f"loop overhead per step (p50, minus the single call): 0 tools {(p(zero, 50) - base50) * 1e6:.1f} us, "
          f"3 tools {(p(three, 50) - base50) * 1e6:.1f} us")


if __name__ == "__main__":
    asyncio.run(main())
