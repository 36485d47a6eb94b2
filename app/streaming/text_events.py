"""The walk both stream encoders share: model events -> text part boundaries.

``TextDelta``/``Finish`` from a turn become ``("text-start",)``, ``("text-delta", text)``,
``("text-end",)``, ``("finish", Finish)``; a provider failure closes an open text part and
becomes ``("error", ModelProviderError)``. The gateway (AI SDK chunks) and the studio
(Mastra chunks) only translate these into their own chunk shapes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from app.llm import Finish, ModelProviderError, TextDelta


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
    except ModelProviderError as exc:
        if text_open:
            yield ("text-end",)
        yield ("error", exc)
