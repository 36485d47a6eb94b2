"""A whole model answer at once: ``complete`` beside ``LLMClient.stream``.

The observer and the reflector (``dev_server.om``) want the model's full text, not its pieces.
``complete`` reads the same stream a turn reads, so a provider call keeps the client's
timeouts, retries and error kinds (``ModelProviderError``), and the local model answers
offline alike.
"""

from __future__ import annotations

from contextlib import aclosing
from dataclasses import dataclass

from dev_server.kernel.model import Finish, LLMClient, ModelRequest, TextDelta, Usage


@dataclass(frozen=True)
class Completion:
    text: str
    usage: Usage
    finish_reason: str


async def complete(llm: LLMClient, request: ModelRequest) -> Completion:
    pieces: list[str] = []
    finish = Finish("other", Usage(0, 0))
    async with aclosing(llm.stream(request)) as events:
        async for event in events:
            if isinstance(event, TextDelta):
                pieces.append(event.text)
            elif isinstance(event, Finish):
                finish = event
    return Completion("".join(pieces), finish.usage, finish.finish_reason)
