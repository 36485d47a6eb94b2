"""One process's OpenTelemetry: a tracer for agent runs and a handler for ``dev_server`` logs.

Where the spans and logs go depends on who owns the DuckDB file (docs/architecture.md#decisions):

- the studio writes them straight into its observability store, into the rows its
  ``/v1/traces`` and ``/v1/logs`` receivers write, read from the SDK as they are
  (``otlp_mapping.spans_from_own``, ``logs_from_own``: encoding each to protobuf and reading
  it back cost more than the rest of its way into DuckDB);
- the gateway sends them with OpenTelemetry's OTLP/HTTP exporters to the studio, or to
  any collector named by the standard ``OTEL_EXPORTER_OTLP_*`` variables.

Both go through an ``ExportQueue``: bounded, retrying, never blocking a chat.

The log handler listens on the process's one ``dev_server`` logger. A process may hold more than
one app (the tests run a gateway and a studio side by side), so each record goes to the
telemetry of the app whose code logged it (none, if that app's telemetry is off): what its
lifespan starts and its requests run in its context (``logging_to``, ``TelemetryScope``),
which tasks and worker threads inherit. A record logged outside every app goes to each.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from opentelemetry.instrumentation.logging.handler import LoggingHandler
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider

from dev_server import __version__
from dev_server.kernel.clock import now_iso, parse_iso
from dev_server.kernel.lazy_imports import LAZY_IMPORTS
from dev_server.observability.export_queue import (
    ExportQueue,
    QueueLogProcessor,
    QueueSpanProcessor,
    log_size,
    span_size,
)
from dev_server.storage.composite import OBSERVABILITY, CompositeStore

log = logging.getLogger(__name__)

# The telemetry of the app whose code runs in this context: None outside every app,
# _TELEMETRY_OFF in an app without telemetry.
_TELEMETRY_OFF = object()
_current: ContextVar[object | None] = ContextVar("dev_server_telemetry", default=None)

# The exporters log every failed attempt; the queue already counts and reports them.
logging.getLogger("opentelemetry.exporter.otlp").setLevel(logging.CRITICAL)

# Seconds one export request may take: OTLP's default. A request that times out is sent
# again whole while the receiver may still be writing it, so a short timeout on a busy
# studio turns into the same work done twice; the queue's batches are bounded in bytes.
EXPORT_TIMEOUT_S = 10


OtlpTarget = tuple[str, dict[str, str] | None]  # the URL an exporter posts to, and its headers


@dataclass(frozen=True)
class TelemetryConfig:
    """What telemetry needs of the settings, handed in by the factory: the deployment's
    name, the export queue's bounds, and where the gateway exports its spans and logs
    (``dev_server.settings.otlp_target``; the studio stores its own)."""

    environment: str
    queue_items: int
    queue_mb: int
    traces: OtlpTarget
    logs: OtlpTarget


class Telemetry:
    """Built with the app (no thread, no log handler yet: building an app does no I/O), so
    the agents' runner is handed its ``tracer`` at construction; the lifespan ``open``s it
    (the export queues start, the log handler is attached) and ``shutdown`` flushes and
    detaches it. Spans ended before ``open`` go nowhere. Opened once."""

    def __init__(self, role: str, config: TelemetryConfig, storage: CompositeStore) -> None:
        self.role = role
        self._config = config
        self._storage = storage
        resource = Resource.create({"service.name": f"dev-server-{role}", "service.version": __version__,
                                    "deployment.environment": config.environment})
        self.tracer_provider = TracerProvider(resource=resource)
        self.logger_provider = LoggerProvider(resource=resource)
        self.tracer = self.tracer_provider.get_tracer("dev-server", __version__)
        self.span_queue: ExportQueue | None = None  # set by open
        self.log_queue: ExportQueue | None = None
        self.handler: LoggingHandler | None = None

    def open(self) -> None:
        """Start exporting: the studio into its own store, the gateway over OTLP."""
        if self.role == "studio":
            span_target, log_target = _direct_exports(self._storage)
        else:
            span_target, log_target = _otlp_exports(self._config)
        bounds = {"max_items": self._config.queue_items, "max_bytes": self._config.queue_mb * 2**20}
        self.span_queue = ExportQueue("spans", *span_target, size=span_size, **bounds)
        self.log_queue = ExportQueue("logs", *log_target, size=log_size, **bounds)
        self.tracer_provider.add_span_processor(QueueSpanProcessor(self.span_queue))
        self.logger_provider.add_log_record_processor(QueueLogProcessor(self.log_queue))
        self.handler = LoggingHandler(level=logging.INFO, logger_provider=self.logger_provider)
        self.handler.addFilter(self._logged_here)
        logging.getLogger("dev_server").addHandler(self.handler)

    def _logged_here(self, _: logging.LogRecord) -> bool:
        return _current.get() in (None, self)

    def stats(self) -> dict[str, Any] | None:
        """The export queues' counts for ``/health``; None before ``open``."""
        if self.span_queue is None or self.log_queue is None:
            return None
        return {"spans": self.span_queue.stats(), "logs": self.log_queue.stats()}

    def shutdown(self) -> None:
        if self.handler is not None:
            logging.getLogger("dev_server").removeHandler(self.handler)
        self.tracer_provider.shutdown()
        self.logger_provider.shutdown()


@contextmanager
def logging_to(telemetry: Telemetry | None) -> Iterator[None]:
    """What runs inside (and every task or thread started from it) logs to ``telemetry``
    only; with None, to no app's telemetry."""
    token = _current.set(_TELEMETRY_OFF if telemetry is None else telemetry)
    try:
        yield
    finally:
        _current.reset(token)


class TelemetryScope:
    """ASGI middleware: each request of the app runs in its telemetry's context (``logging_to``;
    None: telemetry is off)."""

    def __init__(self, app: Any, telemetry: Telemetry | None) -> None:
        self.app = app
        self.telemetry = telemetry

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":  # the lifespan sets its own
            await self.app(scope, receive, send)
            return
        with logging_to(self.telemetry):
            await self.app(scope, receive, send)


def _otlp_exports(config: TelemetryConfig):
    (traces, trace_headers), (logs, log_headers) = config.traces, config.logs
    spans, records = OtlpExport("traces", traces, trace_headers), OtlpExport("logs", logs, log_headers)
    return ((spans, accepts_connections(traces), spans.close), (records, accepts_connections(logs), records.close))


class OtlpExport:
    """The gateway's export of one signal (``traces`` or ``logs``) with OpenTelemetry's
    OTLP/HTTP exporter, which is built (and its modules imported: protobuf, requests) by the
    export queue's worker at the first batch, not at start-up, where they took 40 ms of the
    0.6 s of CPU before the gateway could say ``status: ok``. The queue calls it from one
    thread at a time (its export lock), so the exporter is built once."""

    def __init__(self, signal: str, endpoint: str, headers: dict[str, str] | None) -> None:
        self.signal, self.endpoint, self.headers = signal, endpoint, headers
        self.exporter: Any = None  # built by the first call
        self._success: Any = None

    def __call__(self, batch: Sequence[Any]) -> bool:
        if self.exporter is None:
            self._build()
        return self.exporter.export(batch) == self._success

    def _build(self) -> None:
        with LAZY_IMPORTS:
            if self.signal == "traces":
                from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as Exporter
                from opentelemetry.sdk.trace.export import SpanExportResult as Result
            else:
                from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter as Exporter
                from opentelemetry.sdk._logs.export import LogRecordExportResult as Result
            # building one imports more (its requests session, its compression)
            self.exporter = Exporter(endpoint=self.endpoint, timeout=EXPORT_TIMEOUT_S, headers=self.headers)
        self._success = Result.SUCCESS

    def close(self) -> None:
        """Close the exporter's HTTP session (pooled keep-alive connections to the studio,
        otherwise left to the garbage collector when an app in a process stops)."""
        if self.exporter is not None:
            self.exporter.shutdown()


def accepts_connections(url: str, timeout_s: float = 1.0) -> Callable[[], bool]:
    """A check that something listens at ``url``'s host and port: a receiver that is not
    running refuses at once. Through a proxy it cannot tell, and says yes."""
    parts = urlsplit(url)
    address = (parts.hostname or "localhost", parts.port or (443 if parts.scheme == "https" else 80))

    def check() -> bool:
        with LAZY_IMPORTS:
            import requests.utils  # the exporters' HTTP client: loaded when a check is made

        if requests.utils.get_environ_proxies(url):
            return True
        try:
            with socket.create_connection(address, timeout=timeout_s):
                return True
        except OSError:
            return False

    return check


def _direct_exports(storage: CompositeStore):
    from dev_server.observability.otlp_mapping import logs_from_own, spans_from_own
    from dev_server.storage.observability.writer import ObservabilityWriter

    def writer() -> ObservabilityWriter | None:
        return ObservabilityWriter(storage.domain(OBSERVABILITY)) if storage.has(OBSERVABILITY) else None

    def export_spans(batch: Sequence[Any]) -> bool:
        target = writer()
        if target is None:
            return False  # kept queued (bounded) until the store can be written
        span_rows, trace_rows = spans_from_own(batch, parse_iso(now_iso()))
        target.write_spans_blocking(span_rows, trace_rows)
        return True

    def export_logs(batch: Sequence[Any]) -> bool:
        target = writer()
        if target is None:
            return False
        target.write_logs_blocking(logs_from_own(batch, parse_iso(now_iso())))
        return True

    return (export_spans, None), (export_logs, None)
