"""Resume a chat stream on any process: what ``GET /api/chat/{chatId}/stream`` answers.

``useChat({resume: true})`` asks after a reload (and a client whose connection dropped may
ask with ``Last-Event-ID``). The stream was recorded by whichever process produced it
(``dev_server.streaming.recorder``) in the shared database, so this works on any replica:

- 204 when the chat has no stream to resume: none recorded for the caller's resource (with
  auth on, another user's stream under the same chat id is not seen at all, so an unknown
  and a foreign id get the same answer), another agent's (on the agent route), or one that
  is over (finished, or its producer stopped heartbeating) and the client does not say it
  missed part of it.
- Otherwise the recorded frames after ``Last-Event-ID`` (all of them without it: the AI SDK
  sends none and takes the reply as a replay from its ``start``), then new ones as the
  producer records them (polling the database: the producer may be another process) until
  ``[DONE]``. A stream that ends without it (its producer died or was stopped) ends with an
  ``error`` chunk saying so, then ``[DONE]``. Same ids, framing and headers as the POST.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator

from fastapi import Response
from sse_starlette import ServerSentEvent

from dev_server.kernel.errors import BadRequest
from dev_server.storage.stream_log import FINISHED, StreamLog
from dev_server.streaming import ui_chunks as ui
from dev_server.streaming.sse import DONE, UI_STREAM_HEADERS, encode, sse_response

POLL_S = 0.05
_MAX_EVENT_ID_DIGITS = 18
INTERRUPTED = "The reply was interrupted: the server producing it stopped. What it said so far is saved in the thread."


def parse_last_event_id(header: str | None) -> int | None:
    """The SSE id the client saw last (the gateway's ids are 1, 2, 3, ...); a 400 otherwise."""
    if header is None or not header.strip():
        return None
    value = header.strip()
    if not value.isascii() or not value.isdigit() or len(value) > _MAX_EVENT_ID_DIGITS:
        raise BadRequest("Invalid Last-Event-ID header",
                         [{"field": "Last-Event-ID", "message": "must be the id of a frame of this stream "
                                                                "(a non-negative integer)"}])
    return int(value)


async def resume(stream_log: StreamLog, chat_id: str, *, resource: str | None, agent_id: str | None,
                 last_event_id: int | None) -> Response:
    """The resume response for ``chat_id``; ``resource`` (when set) must own the stream and
    ``agent_id`` (the agent route) must have produced it."""
    row = await stream_log.latest(chat_id, resource)
    if row is None:
        return Response(status_code=204)
    if agent_id is not None and row.agent_id != agent_id:
        return Response(status_code=204)
    if (row.status == FINISHED or stream_log.is_dead(row)) and (
            last_event_id is None or last_event_id >= await stream_log.last_seq(row.stream_id)):
        return Response(status_code=204)
    return sse_response(replay(stream_log, row.stream_id, last_event_id or 0), UI_STREAM_HEADERS, coalesce=False)


async def replay(stream_log: StreamLog, stream_id: str, after: int) -> AsyncGenerator[ServerSentEvent, None]:
    """The stream's frames after id ``after``: recorded ones, then live ones, to its end."""
    while True:
        chunks = await stream_log.chunks_after(stream_id, after)
        if not chunks:
            state = await stream_log.state(stream_id)
            over = state is None or state.status == FINISHED or stream_log.is_dead(state)
            if not over:
                await asyncio.sleep(POLL_S)
                continue
            # The last frames are written with the finish, so one more read has them all.
            chunks = await stream_log.chunks_after(stream_id, after)
            if not chunks:
                yield ServerSentEvent(data=encode(ui.error(INTERRUPTED)), id=str(after + 1), sep="\n")
                yield ServerSentEvent(data=DONE, id=str(after + 2), sep="\n")
                return
        for seq, data in chunks:
            yield ServerSentEvent(data=data, id=str(seq), sep="\n")
            after = seq
            if data == DONE:
                return
