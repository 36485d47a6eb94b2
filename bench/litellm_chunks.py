"""litellm's cost per streamed chunk of a provider reply, against reading the same bytes raw.

A fake OpenAI-compatible provider (its own process, uvloop, so none of its CPU is counted
here) answers ``POST /v1/chat/completions`` with ``max_tokens`` content chunks as OpenAI
frames them (role chunk, content chunks, finish chunk, usage chunk, ``[DONE]``), all in one
body write, so the time is the reader's (loopback hands it over in 64 KB reads).
The same stream is read, in this process, by:

- ``httpx raw`` (the baseline): one reused ``httpx.AsyncClient``, ``aiter_lines`` and
  ``json.loads`` of each ``data:`` line, the delta text taken out: the least any client does;
- ``openai SDK``: ``AsyncOpenAI.chat.completions.create(stream=True)``, what litellm calls;
- ``litellm``: ``litellm.acompletion(stream=True)`` as ``dev_server.llm.client`` calls it (configured
  by ``dev_server.llm.offline``, ``stream_options.include_usage``, no retries);
- ``LiteLLMClient``: our provider path, litellm plus our event translation (``dev_server.llm``);
- ``litellm mock_response``: litellm's own mock stream (no HTTP; it cuts the text into
  3-character chunks), for its wrapper alone.

Each is timed over calls of ``SMALL`` and ``LARGE`` chunks (median of repeated calls, wall
and process CPU time); the per-chunk cost is the slope between the two, so the per-call cost
(connection, request building) is not in it. Prints CPU and wall µs per chunk, each with
its ratio to httpx raw, and the CPU per call. CPU is the figure to read on a shared machine:
wall time also counts waiting for the cores.
Run: ``.venv/bin/python bench/litellm_chunks.py [repeats]`` (default 15).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

SMALL, LARGE = 10, 1000
MODEL = "gpt-4o-mini"
MESSAGES = [{"role": "user", "content": "hello"}]


# -- the fake provider (run with --serve PORT) -------------------------------------------------


def frames(count: int) -> list[bytes]:
    def frame(delta: dict, finish: str | None = None, **extra: object) -> bytes:
        chunk = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1_700_000_000,
                 "model": MODEL, "system_fingerprint": "fp_bench",
                 "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}], **extra}
        return f"data: {json.dumps(chunk)}\n\n".encode()

    usage = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1_700_000_000, "model": MODEL,
             "choices": [], "usage": {"prompt_tokens": 8, "completion_tokens": count, "total_tokens": 8 + count}}
    return [frame({"role": "assistant", "content": ""}),
            *(frame({"content": f" w{i}"}) for i in range(count)),
            frame({}, "stop"), f"data: {json.dumps(usage)}\n\n".encode(), b"data: [DONE]\n\n"]


def serve(port: int) -> None:
    import uvicorn
    import uvloop
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, StreamingResponse
    from starlette.routing import Route

    cache: dict[int, bytes] = {}

    async def completions(request: Request) -> StreamingResponse:
        count = int((await request.json()).get("max_tokens") or SMALL)
        body = cache.setdefault(count, b"".join(frames(count)))

        async def stream():
            yield body

        return StreamingResponse(stream(), media_type="text/event-stream")

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    app = Starlette(routes=[Route("/v1/chat/completions", completions, methods=["POST"]), Route("/health", health)])
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)
    uvloop.run(uvicorn.Server(config).serve())


# -- the readers ------------------------------------------------------------------------------

Reader = Callable[[int], Awaitable[str]]


def readers(base: str) -> dict[str, Reader]:
    import httpx
    from openai import AsyncOpenAI

    from dev_server.kernel.model import ModelRequest, TextDelta
    from dev_server.llm.client import LiteLLMClient
    from dev_server.llm.offline import prepare_litellm

    litellm = prepare_litellm()
    http = httpx.AsyncClient(timeout=30)
    sdk = AsyncOpenAI(base_url=base, api_key="sk-bench", max_retries=0)
    ours = LiteLLMClient(environ={"OPENAI_API_KEY": "sk-bench", "OPENAI_BASE_URL": base}, timeout_s=30)

    async def raw(count: int) -> str:
        text = []
        body = {"model": MODEL, "messages": MESSAGES, "stream": True, "max_tokens": count,
                "stream_options": {"include_usage": True}}
        async with http.stream("POST", f"{base}/chat/completions", json=body,
                               headers={"authorization": "Bearer sk-bench"}) as response:
            async for line in response.aiter_lines():
                if line.startswith("data: ") and line != "data: [DONE]":
                    chunk = json.loads(line[6:])
                    if chunk["choices"]:
                        text.append(chunk["choices"][0]["delta"].get("content") or "")
        return "".join(text)

    async def openai_sdk(count: int) -> str:
        stream = await sdk.chat.completions.create(model=MODEL, messages=MESSAGES, stream=True, max_tokens=count,
                                                   stream_options={"include_usage": True})
        return "".join([chunk.choices[0].delta.content or "" async for chunk in stream if chunk.choices])

    async def through_litellm(count: int, **extra: object) -> str:
        stream = await litellm.acompletion(model=f"openai/{MODEL}", messages=MESSAGES, stream=True, max_tokens=count,
                                           stream_options={"include_usage": True}, timeout=30, max_retries=0,
                                           api_base=base, api_key="sk-bench", **extra)
        return "".join([chunk.choices[0].delta.content or "" async for chunk in stream if chunk.choices])

    async def mock(count: int) -> str:
        return await through_litellm(count, mock_response="".join(f"w{i:<2}"[:3] for i in range(count)))

    async def our_client(count: int) -> str:
        request = ModelRequest(model=f"openai/{MODEL}", messages=MESSAGES, max_tokens=count)
        return "".join([event.text async for event in ours.stream(request) if isinstance(event, TextDelta)])

    return {"httpx raw (baseline)": raw, "openai SDK": openai_sdk, "litellm.acompletion": through_litellm,
            "LiteLLMClient (ours)": our_client, "litellm mock_response": mock}


async def timed(reader: Reader, count: int, repeats: int) -> tuple[float, float]:
    """Median wall and CPU seconds of one call of ``count`` chunks."""
    for _ in range(3):
        await reader(count)
    walls, cpus = [], []
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), time.process_time()
        await reader(count)
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return statistics.median(walls), statistics.median(cpus)


async def measure(base: str, repeats: int) -> None:
    found = readers(base)
    expected = "".join(f" w{i}" for i in range(SMALL))
    for name, reader in found.items():
        if name != "litellm mock_response" and (text := await reader(SMALL)) != expected:
            raise RuntimeError(f"{name} read {text!r}, expected {expected!r}")
    print(f"{'reader':<24} {'CPU µs/chunk':>13} {'ratio':>7} {'wall µs/chunk':>14} {'ratio':>7} "
          f"{'CPU per call, ms':>17}")
    baseline: tuple[float, float] | None = None
    for name, reader in found.items():
        small, large = await timed(reader, SMALL, repeats), await timed(reader, LARGE, repeats)
        wall, cpu = ((large[i] - small[i]) / (LARGE - SMALL) * 1e6 for i in (0, 1))
        per_call = (small[1] - SMALL * cpu / 1e6) * 1000
        baseline = baseline or (cpu, wall)
        print(f"{name:<24} {cpu:>13.1f} {cpu / baseline[0]:>6.1f}x {wall:>14.1f} {wall / baseline[1]:>6.1f}x "
              f"{per_call:>17.2f}", flush=True)


def main() -> None:
    import httpx

    from tests.support import free_port

    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    server = subprocess.Popen([sys.executable, __file__, "--serve", str(port)], env=env, cwd=REPO)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(f"http://127.0.0.1:{port}/health", timeout=1)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise RuntimeError("the fake provider did not start") from None
                time.sleep(0.1)
        print(f"fake provider streams {SMALL} and {LARGE} chunks at once; per chunk = slope between the two; "
              f"median of {repeats} calls each")
        import uvloop

        uvloop.run(measure(f"http://127.0.0.1:{port}/v1", repeats))
    finally:
        server.terminate()
        server.wait(10)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve"]:
        serve(int(sys.argv[2]))
    else:
        main()
