"""Cost of the input boundary (``dev_server.api.input_guard.InputGuard``) per request.

Body: a 50 KB ``POST /api/chat`` body as ``DefaultChatTransport`` sends it (40 UI messages
of text parts, metadata, a few tool parts). Measured in-process, no network: the whole
middleware call (buffering the body in 4 KB chunks, the checks, the replay to an app that
reads it) and the check alone, on a clean body and on one that needs a surrogate repair.
Baseline, in the same run: ``json.loads`` of the same bytes (what any JSON route does once
anyway). Ratios are ours / baseline (median of repeated timings).
Run: .venv/bin/python bench/input_guard.py [iterations]
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from dev_server.api.input_guard import InputGuard, check_json_body  # noqa: E402

TARGET_BYTES = 50_000


def chat_body(surrogate: bool = False) -> bytes:
    sentence = "The quick brown fox jumps over the \"lazy\" dog,\nthen asks what my name was again. "
    messages, index = [], 0
    while True:
        parts = [{"type": "text", "text": sentence * 14, "state": "done"}]
        if index % 5 == 4:
            parts.append({"type": "tool-search", "toolCallId": f"call-{index}", "state": "output-available",
                          "input": {"query": "fox", "filters": {"tags": ["a", "b"], "limit": 5}},
                          "output": {"hits": [{"id": i, "score": 0.5} for i in range(3)]}})
        messages.append({"id": f"msg-{index}", "role": "user" if index % 2 == 0 else "assistant",
                         "parts": parts, "metadata": {"createdAt": "2026-12-02T03:00:00Z", "local": True}})
        body = json.dumps({"id": "chat-1", "conversationId": "bench", "trigger": "submit-message",
                           "messages": messages})
        index += 1
        if len(body) >= TARGET_BYTES:
            break
    if surrogate:
        body = body.replace("brown fox", "brown \\ud800 fox", 1)
    return body.encode()


async def call_through_middleware(guard: InputGuard, body: bytes) -> None:
    chunks = [body[i:i + 4096] for i in range(0, len(body), 4096)]
    position = 0

    async def receive():
        nonlocal position
        chunk = chunks[position]
        position += 1
        return {"type": "http.request", "body": chunk, "more_body": position < len(chunks)}

    async def send(_message) -> None:
        pass

    scope = {"type": "http", "method": "POST", "path": "/api/chat", "raw_path": b"/api/chat", "query_string": b"",
             "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]}
    await guard(scope, receive, send)


def interleaved(variants: dict, iterations: int, repeats: int = 9) -> dict[str, tuple[float, float]]:
    """Per variant: (median seconds per call, median ratio to the first variant), the
    variants timed in turn within each repeat so that load on the machine hits all alike."""
    seconds: dict[str, list[float]] = {name: [] for name in variants}
    ratios: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(repeats):
        for name, fn in variants.items():
            start = time.perf_counter()
            for _ in range(iterations):
                fn()
            seconds[name].append((time.perf_counter() - start) / iterations)
        base = seconds[next(iter(variants))][-1]
        for name in variants:
            ratios[name].append(seconds[name][-1] / base)
    return {name: (statistics.median(seconds[name]), statistics.median(ratios[name])) for name in variants}


def main() -> None:
    iterations = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    clean, dirty = chat_body(), chat_body(surrogate=True)

    async def reads_body(scope, receive, send) -> None:
        while (await receive()).get("more_body"):
            pass

    guard = InputGuard(reads_body)
    loop = asyncio.new_event_loop()
    results = interleaved({
        "baseline json.loads": lambda: json.loads(clean),
        "check_json_body (clean)": lambda: check_json_body(clean, declared=True),
        "InputGuard call (clean)": lambda: loop.run_until_complete(call_through_middleware(guard, clean)),
        "check_json_body (repair)": lambda: check_json_body(dirty, declared=True),
    }, iterations)
    loop.close()
    print(f"body: {len(clean):,} bytes, {iterations} iterations x 9 interleaved repeats, medians")
    for name, (seconds, ratio) in results.items():
        print(f"{name:28s} {seconds * 1e6:8.1f} us   ratio {ratio:5.2f}")

if __name__ == "__main__":
    main()
