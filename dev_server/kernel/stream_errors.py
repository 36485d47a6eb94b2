"""What a client is told when a stream fails after it started (``dev_server.kernel.events.edge_events``).

A failure becomes a ``StreamError``: a ``ModelProviderError`` (or any failure carrying a
string ``kind`` and ``message``, as the runner's own do) keeps its kind and message;
anything else is logged with its traceback and reported as ``internal`` with a generic
message, so a stream never ends without saying why.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

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
