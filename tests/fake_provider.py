"""A fake OpenAI-compatible provider with fault modes, for the provider-fault tests.

``POST /v1/chat/completions`` answers like OpenAI's chat completions API. The behaviour is
picked by a marker in the last user message, ``[[fault:MODE]]`` or ``[[fault:MODE=N]]``,
so the same server serves direct ``LiteLLMClient`` calls and turns through a real gateway
(whose agents' model ids are fixed):

    (no marker)      a normal stream: "Hello from the fake provider", usage, [DONE]
    stall_first=N    sleep N s before the first byte (headers included)
    stall_mid=N      two text chunks, then sleep N s, then the rest
    malformed        a text chunk, then a ``data:`` line that is not JSON
    wrong_shape      a text chunk, then a JSON chunk that is not a chat.completion.chunk
    inband_error     a text chunk, then ``data: {"error": {"message": ...}}``
    empty            200 text/event-stream with only ``data: [DONE]``
    plain_json       a non-streaming chat.completion JSON body although a stream was asked for
    no_usage         a normal stream without the usage chunk
    empty_usage      a stream with no content: only a finish chunk, the usage chunk (input billed) and [DONE]
    status=NNN       an OpenAI-shaped error body with HTTP status NNN (401, 429, 500, ...)

``POST /v1/embeddings`` answers like OpenAI's embeddings API with a deterministic 8-number
vector per input (its words hashed into buckets, so equal texts get equal vectors); while
``embeddings_down`` is set it answers 503, a provider outage.

Every request is counted (``FakeProvider.requests``) and its body kept (``bodies``, and
``last_body``) with its headers (``headers``, lower-case names), so tests can assert how many
attempts were made and what reached the provider.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from tests.support import LiveApp

REPLY = "Hello from the fake provider"
INBAND_MESSAGE = "The fake provider ran out of widgets"
_MARKER = re.compile(r"\[\[fault:([a-z_]+)(?:=([0-9.]+))?\]\]")


def _chunk(model: str, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def _sse(data: dict[str, Any] | str) -> bytes:
    return f"data: {data if isinstance(data, str) else json.dumps(data)}\n\n".encode()


def _last_user_text(body: dict[str, Any]) -> str:
    for message in reversed(body.get("messages") or []):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):
                return " ".join(p.get("text", "") for p in content if isinstance(p, dict))
            return str(content or "")
    return ""


class FakeProvider:
    """The fake's state and its FastAPI app; ``with FakeProvider() as fake:`` serves it."""

    def __init__(self) -> None:
        self.requests = 0
        self.last_body: dict[str, Any] | None = None
        self.bodies: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []  # each completion request's, by index like ``bodies``
        self.app = FastAPI()
        self.app.post("/v1/chat/completions")(self._completions)
        self.app.post("/v1/embeddings")(self._embeddings)
        self.embeddings_down = False
        self.embedding_inputs: list[str] = []
        self._server: LiveApp | None = None

    def turn_bodies(self) -> list[dict[str, Any]]:
        """The bodies of chat turns: without the title requests that a reply's background
        title job may send to the same provider (``dev_server.memory.titles``), at any moment."""
        from dev_server.memory.titles import TITLE_INSTRUCTIONS

        opening = TITLE_INSTRUCTIONS.splitlines()[0]
        return [body for body in self.bodies
                if opening not in str((body.get("messages") or [{}])[0].get("content", ""))]

    @property
    def base_url(self) -> str:
        assert self._server is not None
        return f"{self._server.url}/v1"

    def __enter__(self) -> FakeProvider:
        self._server = LiveApp(self.app).__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.__exit__(*exc)

    async def _embeddings(self, request: Request) -> Response:
        body = await request.json()
        if self.embeddings_down:
            return JSONResponse({"error": {"message": "embeddings are down", "type": "fake_error", "code": "503"}},
                                status_code=503)
        inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
        self.embedding_inputs += inputs
        data = []
        for index, text in enumerate(inputs):
            vector = [0.0] * 8
            for word in re.findall(r"[a-z]+", text.lower()):
                vector[sum(map(ord, word)) % 8] += 1.0
            data.append({"object": "embedding", "index": index, "embedding": vector})
        return JSONResponse({"object": "list", "data": data, "model": body.get("model", "fake"),
                             "usage": {"prompt_tokens": len(inputs), "total_tokens": len(inputs)}})

    async def _completions(self, request: Request) -> Response:
        self.requests += 1
        body = await request.json()
        self.last_body = body
        self.bodies.append(body)
        self.headers.append(dict(request.headers))
        model = body.get("model", "fake")
        match = _MARKER.search(_last_user_text(body))
        mode, arg = (match.group(1), float(match.group(2) or 0)) if match else ("ok", 0.0)
        if mode == "status":
            status = int(arg)
            return JSONResponse({"error": {"message": f"fake provider error {status}", "type": "fake_error",
                                           "code": str(status)}}, status_code=status)
        if mode == "stall_first":
            await asyncio.sleep(arg)
        if mode == "plain_json":
            return JSONResponse({"id": "chatcmpl-fake", "object": "chat.completion", "created": int(time.time()),
                                 "model": model, "choices": [{"index": 0, "finish_reason": "stop",
                                                              "message": {"role": "assistant", "content": REPLY}}],
                                 "usage": {"prompt_tokens": 3, "completion_tokens": 5, "total_tokens": 8}})
        return StreamingResponse(self._stream(model, mode, arg), media_type="text/event-stream")

    async def _stream(self, model: str, mode: str, arg: float) -> AsyncIterator[bytes]:
        if mode == "empty":
            yield _sse("[DONE]")
            return
        if mode == "empty_usage":
            yield _sse(_chunk(model, {"role": "assistant", "content": ""}, "stop"))
            yield _sse({**_chunk(model, {}), "choices": [],
                        "usage": {"prompt_tokens": 11, "completion_tokens": 0, "total_tokens": 11}})
            yield _sse("[DONE]")
            return
        yield _sse(_chunk(model, {"role": "assistant", "content": ""}))
        words = REPLY.split(" ")
        for index, word in enumerate(words):
            yield _sse(_chunk(model, {"content": word if index == 0 else f" {word}"}))
            if index == 1:
                if mode == "stall_mid":
                    await asyncio.sleep(arg)
                elif mode == "malformed":
                    yield b"data: {not json at all\n\n"
                    return
                elif mode == "wrong_shape":
                    yield _sse({"unexpected": "shape", "choices": "not-a-list"})
                    return
                elif mode == "inband_error":
                    yield _sse({"error": {"message": INBAND_MESSAGE, "type": "server_error", "code": "widgets"}})
                    return
        yield _sse(_chunk(model, {}, "stop"))
        if mode != "no_usage":
            usage = {"prompt_tokens": 7, "completion_tokens": len(words), "total_tokens": 7 + len(words)}
            yield _sse({**_chunk(model, {}), "choices": [], "usage": usage})
        yield _sse("[DONE]")
