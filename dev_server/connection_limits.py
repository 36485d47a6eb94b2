"""The HTTP/1.1 protocol both processes serve with: uvicorn's httptools protocol plus read
deadlines and a connection cap (``DEV_SERVER_HEADER_TIMEOUT_S``, ``_BODY_TIMEOUT_S``,
``_MAX_CONNECTIONS``).

uvicorn times only the idle gap between two requests (``timeout_keep_alive``), and every
byte received cancels that timer: a client that sends half a request line, or headers with
a ``Content-Length`` and then nothing, holds its connection (and its slot) for as long as
it likes. An ASGI middleware cannot help with headers (the app runs only once they are
complete), so the deadlines live in the protocol, where every state of a connection has a
timer:

- connected, or receiving a request's headers: the request line and headers must be
  complete within ``header_timeout_s`` of the connection being made, or of the first byte
  after an idle keep-alive period;
- receiving its body: the whole body within ``body_timeout_s`` of the headers' end (for a
  pipelined request, of the previous response's end: it is not read before);
- the app running, or streaming its response: no deadline (a turn may stream for minutes);
- idle between requests: uvicorn's own keep-alive timer.

A late request is answered ``408`` with a JSON body and ``Connection: close``, then the
connection is closed; a fresh connection that sent nothing is closed silently. On a late
body the app's ``receive`` returns ``http.disconnect`` and whatever it sends is dropped; if
the app had already answered without reading the body, the connection is just closed (or,
while that answer still streams, it is left to finish and the connection is not reused).

The cap is uvicorn's ``limit_concurrency`` check (connections, or running requests, of this
process), answered in the app's error shape: a request whose headers complete while the
process holds more than ``max_connections`` connections (counting its own) or runs that
many requests gets ``503 {"error": ...}`` with ``Retry-After`` and ``Connection: close``.
Requests are refused, not queued; the kernel's accept backlog is the only queue. A
connection beyond the cap is still accepted (and held by the header deadline at most),
so the deadlines are what bound a flood of slow connections.

Writes are corked per loop turn (``CorkedWrites``): uvicorn writes a response's status line
and headers, then its body, each with its own ``transport.write``; with uvloop that is two
``send`` system calls and two TCP segments for a small JSON answer. The writes of one turn
of the event loop are joined and sent when the turn ends (one ``call_soon``), in order;
``close`` sends what is pending first. Flow control keeps the real transport.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from dev_server.settings import Settings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ConnectionLimits:
    header_timeout_s: float
    body_timeout_s: float
    max_connections: int | None  # None: no cap

    @classmethod
    def from_settings(cls, settings: Settings) -> ConnectionLimits:
        return cls(settings.header_timeout_s, settings.body_timeout_s, settings.max_connections)


def http_protocol(settings: Settings) -> Callable[..., asyncio.Protocol]:
    """What uvicorn's ``Config(http=...)`` takes: the guarded protocol with these settings."""
    return partial(GuardedHttpToolsProtocol, limits=ConnectionLimits.from_settings(settings))


class _Throttled:
    """One warning now and then (a flood would otherwise be a log line per connection)."""

    def __init__(self, every_s: float = 10.0) -> None:
        self.every_s = every_s
        self.count = 0
        self.last = float("-inf")

    def warn(self, message: str, *args: Any) -> None:
        now = time.monotonic()
        if now - self.last < self.every_s:
            self.count += 1
            return
        if self.count:
            message, args = message + " (and %d more since the last such line)", (*args, self.count)
        log.warning(message, *args)
        self.count, self.last = 0, now


_late_headers, _late_bodies, _refused = _Throttled(), _Throttled(), _Throttled()


def _json_response(status: bytes, error: str, *extra_headers: bytes) -> bytes:
    body = json.dumps({"error": error}).encode()
    head = [b"HTTP/1.1 " + status, b"content-type: application/json", b"content-length: %d" % len(body),
            *extra_headers, b"connection: close"]
    return b"\r\n".join(head) + b"\r\n\r\n" + body


async def _at_capacity(scope: Any, receive: Any, send: Any) -> None:
    body = json.dumps({"error": "The server is at its connection limit; retry shortly"}).encode()
    await send({"type": "http.response.start", "status": 503,
                "headers": [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body)),
                            (b"retry-after", b"1"), (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": body})


class CorkedWrites:
    """A connection's transport whose writes within one loop turn are sent as one."""

    __slots__ = ("transport", "_loop", "_pending")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self.transport = transport
        self._loop = loop
        self._pending: list[bytes] = []

    def write(self, data: bytes) -> None:
        if not self._pending:
            self._loop.call_soon(self.flush)
        self._pending.append(data)

    def flush(self) -> None:
        if not self._pending:
            return
        data = self._pending[0] if len(self._pending) == 1 else b"".join(self._pending)
        self._pending.clear()
        if not self.transport.is_closing():  # the connection was lost meanwhile: nobody to send to
            self.transport.write(data)

    def close(self) -> None:
        self.flush()
        self.transport.close()

    def get_write_buffer_size(self) -> int:
        return self.transport.get_write_buffer_size() + sum(map(len, self._pending))

    def __getattr__(self, name: str) -> Any:  # is_closing, pause_reading, get_extra_info, ...
        return getattr(self.transport, name)


class GuardedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with the deadlines and the cap above (one per connection)."""

    def __init__(self, *args: Any, limits: ConnectionLimits, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.limits = limits
        self.limit_concurrency = None  # checked below instead, answered as JSON
        self._deadline: asyncio.TimerHandle | None = None
        self._request_bytes = False  # a late request that sent something gets a 408; a silent one just closes

    # -- the timers ------------------------------------------------------------------------

    def _arm(self, seconds: float, expired: Any) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(seconds, expired)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _serving(self) -> bool:
        """A request of this connection is being handled (its response not yet complete)."""
        return self.cycle is not None and not self.cycle.response_complete

    # -- uvicorn's protocol callbacks ------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        # Every write of the connection, the responses' and ours, corked per loop turn.
        self.transport = CorkedWrites(transport, self.loop)  # type: ignore[assignment]
        self._arm(self.limits.header_timeout_s, self._headers_late)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._deadline is None and not self._serving():
            # The first byte after a keep-alive pause (uvicorn's keep-alive timer, which
            # every byte cancels, no longer bounds this connection).
            self._arm(self.limits.header_timeout_s, self._headers_late)
        self._request_bytes = True
        super().data_received(data)

    def on_headers_complete(self) -> None:
        self._disarm()
        self._request_bytes = False
        cap = self.limits.max_connections
        if cap is not None and self._over_cap(cap):
            _refused.warn("refused a request: over the cap of %d connections or running requests", cap)
            app, self.app = self.app, _at_capacity
            try:
                super().on_headers_complete()
            finally:
                self.app = app
        else:
            super().on_headers_complete()
        if self.cycle is not None and not self.pipeline:  # a queued pipelined request is not being read yet
            self._arm(self.limits.body_timeout_s, self._body_late)

    def on_message_complete(self) -> None:
        self._disarm()
        super().on_message_complete()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        # A pipelined request whose headers came during the previous response starts now;
        # its body (if any is still to come) is read from now on.
        cycle = self.cycle
        if self._deadline is None and cycle is not None and cycle.more_body and not self.transport.is_closing():
            self._arm(self.limits.body_timeout_s, self._body_late)

    def handle_websocket_upgrade(self) -> None:
        self._disarm()
        super().handle_websocket_upgrade()

    def _over_cap(self, cap: int) -> bool:
        """More than ``cap`` connections (this one included) or ``cap`` running requests.
        A connection already closed by the server (say, one just refused) and a request
        already finished are only waiting for the loop to forget them: they hold no slot.
        The exact count is taken only when the quick one says the cap is reached."""
        if len(self.connections) > cap and sum(not c.transport.is_closing() for c in self.connections) > cap:
            return True
        return len(self.tasks) >= cap and sum(not task.done() for task in self.tasks) >= cap

    # -- deadlines passed ------------------------------------------------------------------

    def _headers_late(self) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        if self._request_bytes:
            _late_headers.warn("closed a connection from %s: request headers not complete within %s s",
                               _address(self.client), self.limits.header_timeout_s)
            self.transport.write(_json_response(
                b"408 Request Timeout", f"Request headers not received within {self.limits.header_timeout_s:g} s"))
        self.transport.close()

    def _body_late(self) -> None:
        self._deadline = None
        cycle = self.cycle
        if cycle is None or self.transport.is_closing():
            return
        _late_bodies.warn("closed a connection from %s: request body not complete within %s s",
                          _address(self.client), self.limits.body_timeout_s)
        if not cycle.response_started:
            # What connection_lost would do: the app's receive() now returns http.disconnect
            # and its sends are dropped, so only this answer is written.
            cycle.disconnected = True
            cycle.message_event.set()
            self.transport.write(_json_response(
                b"408 Request Timeout", f"Request body not received within {self.limits.body_timeout_s:g} s"))
        elif not cycle.response_complete:
            cycle.keep_alive = False  # let the response finish; the connection is not reused
            return
        self.transport.close()


def _address(client: tuple[str, int] | None) -> str:
    return f"{client[0]}:{client[1]}" if client else "?"
