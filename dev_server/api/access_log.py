"""One log line per HTTP request: method, path, status and milliseconds.

``GET /api/memory/threads 200 3.1 ms``, written when the response has been sent (for a
streamed reply, its last byte: a chat's line gives the whole turn's time), on the
``access`` logger at INFO. uvicorn's own access log is off (``dev_server.workers.server_config``):
it gives no duration. A response the client did not wait for ends in ``(client left)``; a
request that raised gets 500. The query string is left out (it may carry what a log should
not). Two kinds of traffic are logged at DEBUG when they succeed, or they would bury the
rest: ``/health`` (a probe every few seconds) and the OTLP receivers ``/v1/...`` (the
gateway's span and log exports after every turn).

Outermost middleware, so it sees what every other layer answered: a 401 from auth, a 413
from the body limit, a CORS preflight. What the HTTP protocol itself answers before the app
runs (a 408 on a slow request, a 503 past the connection cap) is not a request the app saw:
``dev_server.connection_limits`` warns about those, throttled. The logger is not under ``dev_server``, so access lines
are not exported as telemetry logs: the Studio's own polling would fill its log view.
"""

from __future__ import annotations

import logging
import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger("access")


def _quiet(path: str, status: int | None) -> bool:
    """Routine traffic, logged at DEBUG when it succeeds."""
    return status is not None and status < 400 and (path == "/health" or path.startswith("/v1/"))


class AccessLog:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status: int | None = None
        sent = left = False

        async def receiving() -> Message:
            nonlocal left
            message = await receive()
            if message["type"] == "http.disconnect" and not sent:
                left = True
            return message

        async def sending(message: Message) -> None:
            nonlocal status, sent
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body" and not message.get("more_body", False):
                sent = True
            await send(message)

        try:
            await self.app(scope, receiving, sending)
        except BaseException:
            status = status or 500
            raise
        finally:
            path = scope["path"]
            level = logging.DEBUG if _quiet(path, status) else logging.INFO
            if log.isEnabledFor(level):
                log.log(level, "%s %s %s %.1f ms%s", scope["method"], path, status or "-",
                        (time.perf_counter() - started) * 1000, " (client left)" if left and not sent else "")
