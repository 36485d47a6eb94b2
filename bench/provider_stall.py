"""How long a client waits on a provider that stalls before its first byte.

A fake OpenAI-compatible provider (tests/fake_provider.py) stalls ``STALL_S`` before it
answers. Baseline, in the same run: litellm called the way the gateway called it before
(HTTP timeout ``TIMEOUT_S``, the provider SDK's default retries). Measured: ``LiteLLMClient``
with the same HTTP timeout, a first-token deadline of ``TIMEOUT_S`` and no retries.
Prints the wait and the provider requests of each, and the ratio of the waits.
Run: .venv/bin/python bench/provider_stall.py
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from dev_server.kernel.model import ModelRequest  # noqa: E402
from dev_server.llm import LiteLLMClient, ModelProviderError, prepare_litellm  # noqa: E402
from tests.fake_provider import FakeProvider  # noqa: E402

STALL_S = 6
TIMEOUT_S = 1.5
MESSAGES = [{"role": "user", "content": f"hi [[fault:stall_first={STALL_S}]]"}]


async def baseline(fake: FakeProvider) -> tuple[float, int, str]:
    litellm = prepare_litellm()
    fake.requests = 0
    started = time.perf_counter()
    try:
        response = await litellm.acompletion(model="openai/gpt-4o-mini", api_key="sk-bench", api_base=fake.base_url,
                                             messages=MESSAGES, stream=True, timeout=TIMEOUT_S)
        async for _ in response:
            pass
        outcome = "answered"
    except Exception as exc:
        outcome = type(exc).__name__
    return time.perf_counter() - started, fake.requests, outcome


async def measured(fake: FakeProvider) -> tuple[float, int, str]:
    client = LiteLLMClient(environ={"OPENAI_API_KEY": "sk-bench", "OPENAI_BASE_URL": fake.base_url},
                           timeout_s=TIMEOUT_S, first_token_s=TIMEOUT_S, total_s=60, retries=0)
    await client.warm_up()
    fake.requests = 0
    started = time.perf_counter()
    try:
        async for _ in client.stream(ModelRequest("openai/gpt-4o-mini", MESSAGES)):
            pass
        outcome = "answered"
    except ModelProviderError as exc:
        outcome = exc.kind
    return time.perf_counter() - started, fake.requests, outcome


async def main() -> None:
    with FakeProvider() as fake:
        await measured(fake)  # warm both paths once
        base = await baseline(fake)
        ours = await measured(fake)
    print(f"provider stalls {STALL_S} s, HTTP timeout {TIMEOUT_S} s")
    print(f"baseline (SDK retries on):   waited {base[0]:.2f} s, {base[1]} requests, {base[2]}")
    print(f"LiteLLMClient (ours, 0 retries): waited {ours[0]:.2f} s, {ours[1]} request(s), {ours[2]}")
    print(f"wait ratio ours/baseline: {ours[0] / base[0]:.2f}")


if __name__ == "__main__":
    asyncio.run(main())
