"""Server-sent events framing shared by both streams: ``data: <json>\\n\\n``, ending ``[DONE]``.

``encode`` must never fail: the frame is turned into UTF-8 bytes by sse-starlette *after*
our generator yielded it, where an error can only drop the connection (no ``error``
chunk, no ``[DONE]``). UTF-8 cannot encode a lone UTF-16 surrogate (``"\\ud800"`` is
valid JSON, so one can arrive in a request, come back from storage, or be echoed by a
model), so ``repair_text`` (``dev_server.kernel.text``) replaces each with U+FFFD.
Nor can a number JSON has no form for (an infinity, an integer too long to write out) fail
it or reach the client as invalid JSON: ``dev_server.kernel.json_text``.

``sse_frames`` turns a turn's chunks (either encoder's: ``ui_chunks.encode_reply``,
``mastra_chunks.encode_run``) into frames the same way for both processes: a failure of the
encoder itself is still an error chunk, the turn is closed whatever happens, ``[DONE]``
comes last. ``sse_response`` is the one response every stream of both processes is sent in.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.background import BackgroundTask

from dev_server.kernel.json_text import Encoder
from dev_server.kernel.stream_errors import StreamError, stream_error
from dev_server.kernel.text import repair_text
from dev_server.streaming.coalesce import coalesced

DONE = "[DONE]"
PING_S = 15

STREAM_HEADERS = {
    "Cache-Control": "no-cache",
    "Connection": "keep-alive",
    "X-Accel-Buffering": "no",
}
UI_STREAM_HEADERS = {**STREAM_HEADERS, "x-vercel-ai-ui-message-stream": "v1"}


# strict JSON, dev_server.kernel.json_text
_CHUNK_JSON = Encoder(separators=(",", ":"), ensure_ascii=False, default=str)


def encode(chunk: dict[str, Any]) -> str:
    return repair_text(_CHUNK_JSON.encode(chunk))


async def sse_frames(chunks: AsyncIterator[dict[str, Any]], *, error: Callable[[StreamError], dict[str, Any]],
                     close: Callable[[], Awaitable[None]], numbered: bool) -> AsyncGenerator[ServerSentEvent, None]:
    """One frame per chunk, then ``[DONE]``. ``error`` makes the chunk that reports the
    encoder's own failure; ``close`` ends the turn (before ``[DONE]``, also when the client
    left); ``numbered``: every frame gets an SSE ``id`` 1, 2, 3, ... (the gateway's, which a
    client resumes from)."""
    count = 0

    def frame(data: str) -> ServerSentEvent:
        nonlocal count
        count += 1
        return ServerSentEvent(data=data, id=str(count) if numbered else None, sep="\n")

    try:
        async for chunk in chunks:
            yield frame(encode(chunk))
    except Exception as exc:  # the encoder itself broke: still say so, and end the stream
        yield frame(encode(error(stream_error(exc))))
    finally:
        await close()
    yield frame(DONE)


def sse_response(frames: AsyncGenerator[ServerSentEvent, None], headers: Mapping[str, str], *, coalesce: bool = True,
                 close: Callable[[], Awaitable[None]] | None = None) -> EventSourceResponse:
    """The response of a stream. ``coalesce``: frames ready together go out as one body chunk
    (``dev_server.streaming.coalesce``); ``close`` runs after the response, for a response that
    never started streaming (the frames' own ``finally`` does it otherwise; closing twice is
    harmless)."""
    body = coalesced(frames) if coalesce else frames
    return EventSourceResponse(body, headers=dict(headers), sep="\n", ping=PING_S,
                               background=BackgroundTask(close) if close is not None else None)
