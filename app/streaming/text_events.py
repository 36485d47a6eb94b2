"""The walk both stream encoders share: model events -> text part boundaries.

``TextDelta``/``Finish`` from a turn become ``("text-start",)``, ``("text-delta", text)``,
``("text-end",)``, ``("finish", Finish)``. A failure of any kind closes an open text part
and becomes ``("error", StreamError)``: a ``ModelProviderError`` (or any failure carrying a
string ``kind`` and ``message``, as the runner's own do) keeps its kind and message;
anything else is logged with its traceback and reported as ``internal`` with a generic
message, so a stream never ends without saying why. The gateway (AI SDK chunks) and the
studio (Mastra chunks) only translate these into their own chunk shapes.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from app.llm import Finish, TextDelta

log = logging.getLogger(__name__)

INTERNAL_MESSAGE = "The reply failed on the server"


@dataclass(frozen=True)
class StreamError:
    kind: str
    message: str


def stream_error(exc: BaseException) -> StreamError:
    """What a client is told about ``exc``; unknown failures are logged here."""
    kind, message = getattr(exc, "kind", None), getattr(exc, "message", None)
    if isinstance(kind, str) and isinstance(message, str):
        return StreamError(kind, message)
    log.error("stream failed after the response started", exc_info=exc)
    return StreamError("internal", INTERNAL_MESSAGE)


async def text_events(first: TextDelta | Finish, events: AsyncIterator[TextDelta | Finish]) -> AsyncIterator[tuple[Any, ...]]:
    text_open = False
    try:
        event: TextDelta | Finish | None = first
        while event is not None:
            if isinstance(event, TextDelta):
                if not text_open:
                    text_open = True
                    yield ("text-start",)
                yield ("text-delta", event.text)
            else:
                if text_open:
                    text_open = False
                    yield ("text-end",)
                yield ("finish", event)
            event = await anext(events, None)
    except Exception as exc:
        if text_open:
            yield ("text-end",)
        yield ("error", stream_error(exc))
