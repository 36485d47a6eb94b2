"""A bounded, retrying export queue between OpenTelemetry and an exporter.

Observability must never block or fail a chat (docs/architecture.md#decisions). The SDK's batch
processors drop *new* items when full and give up on a batch whose export failed, so
spans made while the studio is down would be lost. This queue keeps finished spans (or
log records) in memory up to ``max_items`` and ``max_bytes``; when full it drops the
*oldest*, counts them and warns (once per burst). A worker thread exports batches; a failed
export keeps its batch at the head of the queue and retries with backoff (0.5 s doubling to
30 s), so what was queued while the receiver was down arrives once it is back.

Sizes: an item's size is estimated by ``size`` (for a span, the length of its string
attributes: a model generation's input is the whole prompt, and with Observational Memory
that is the thread's unobserved window, tens of kilobytes on a long thread). Counting items
alone let 10,000 such spans hold hundreds of megabytes, and made 512-span requests of tens
of megabytes that the receiver could not take within the exporter's timeout, so the same
batch failed again and again while the queue filled. A batch is therefore at most
``batch_size`` items and ``batch_bytes`` (always at least one item), and the worker sends
batch after batch while a full one is waiting instead of once per ``interval_s``.

At shutdown what is left is flushed, unless the receiver is down: a gateway whose studio is
not running (or already stopped) used to spend seconds there, in the OTLP exporter's own
retries, first in the flush and then waiting for the worker's attempt. ``reachable`` (a
quick check that the receiver accepts connections) tells a flush worth making from one
that cannot succeed; the worker and a flush take turns, so a batch is never sent twice.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from opentelemetry.context import Context
from opentelemetry.sdk._logs import LogRecordProcessor, ReadableLogRecord, ReadWriteLogRecord
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

# Outside the "dev_server" logger tree on purpose: the log exporter is attached there, and
# the queue's own warnings must not be exported through itself.
log = logging.getLogger("dev-server.export-queue")

Export = Callable[[Sequence[Any]], bool]
Reachable = Callable[[], bool]
Close = Callable[[], None]
ITEM_OVERHEAD = 256  # bytes an item costs beyond its measured strings (ids, times, names, framing)


class ExportQueue:
    def __init__(self, name: str, export: Export, reachable: Reachable | None = None, close: Close | None = None,
                 *, max_items: int = 10_000,
                 max_bytes: int = 64 * 2**20, batch_size: int = 512, batch_bytes: int = 2 * 2**20,
                 size: Callable[[Any], int] = lambda _: 0, interval_s: float = 0.5,
                 max_backoff_s: float = 30.0) -> None:
        self.name = name
        self._export = export
        self._reachable = reachable
        self._close = close
        self._items: deque[tuple[Any, int]] = deque()  # (item, its estimated bytes)
        self._bytes = 0
        self._size = size
        self._max_items = max_items
        self._max_bytes = max_bytes
        self._batch_size = batch_size
        self._batch_bytes = batch_bytes
        self._interval_s = interval_s
        self._max_backoff_s = max_backoff_s
        self._lock = threading.Lock()
        self._exporting = threading.Lock()  # one export at a time: the worker's, or a flush's
        self._wake = threading.Event()
        self._stopping = False
        self.dropped = 0
        self.exported = 0
        self.failures = 0
        self.export_s = 0.0  # wall time spent in export calls: near the elapsed time, export is the limit
        self._last_export_ok = True
        self._warned_at_drop = 0
        self._thread = threading.Thread(target=self._run, name=f"export-{name}", daemon=True)
        self._thread.start()

    def put(self, item: Any) -> None:
        size = ITEM_OVERHEAD + self._size(item)
        with self._lock:
            while self._items and (len(self._items) >= self._max_items or self._bytes + size > self._max_bytes):
                self._bytes -= self._items.popleft()[1]
                self.dropped += 1
                if self.dropped >= self._warned_at_drop * 2 or self._warned_at_drop == 0:
                    self._warned_at_drop = self.dropped
                    log.warning("%s export queue full (%d items, %d MB): dropped %d oldest so far", self.name,
                                self._max_items, self._max_bytes // 2**20, self.dropped)
            self._items.append((item, size))
            self._bytes += size
            if self._full_batch():
                self._wake.set()

    def _full_batch(self) -> bool:
        return len(self._items) >= self._batch_size or self._bytes >= self._batch_bytes

    def __len__(self) -> int:
        return len(self._items)

    def _run(self) -> None:
        backoff = 0.0
        while True:
            if backoff or not self._full_batch():  # a backlog goes out batch after batch
                self._wake.wait(backoff or self._interval_s)
            self._wake.clear()
            if not self._export_once():
                backoff = min(self._max_backoff_s, max(0.5, backoff * 2))
                if self._stopping:
                    return
                continue
            backoff = 0.0
            if self._stopping and not self._items:
                return

    def _export_once(self) -> bool:
        """Export one batch from the head; True when it went out (or there was nothing)."""
        with self._exporting:
            with self._lock:
                batch, size = [], 0
                for item, item_size in self._items:
                    if batch and (len(batch) >= self._batch_size or size + item_size > self._batch_bytes):
                        break
                    batch.append(item)
                    size += item_size
            if not batch:
                return True
            started = time.monotonic()
            try:
                ok = self._export(batch)
            except Exception as exc:  # an exporter bug must not kill the worker
                log.warning("%s export failed: %s", self.name, exc)
                ok = False
            self.export_s += time.monotonic() - started
            self._last_export_ok = ok
            if not ok:
                self.failures += 1
                return False
            with self._lock:
                # Drops may have removed some of the batch from the head meanwhile; remove
                # only what is still there, by identity.
                sent = {id(item) for item in batch}
                while self._items and id(self._items[0][0]) in sent:
                    self._bytes -= self._items.popleft()[1]
            self.exported += len(batch)
            return True

    def flush(self, timeout_s: float = 5.0) -> bool:
        deadline = time.monotonic() + timeout_s
        while self._items and time.monotonic() < deadline:
            if not self._export_once():
                return False
        return not self._items

    def shutdown(self, timeout_s: float = 3.0) -> None:
        """Flush what is left, unless the receiver is down (the last export failed, or it
        refuses connections now): a process that is asked to stop must not wait out export
        retries, neither in a flush nor in the worker's own attempt (a daemon thread,
        then left behind). Then the exporter is closed (its pooled connections with it)."""
        self._stopping = True
        if self._items and self._last_export_ok and (self._reachable is None or self._reachable()):
            self.flush(timeout_s)
        self._wake.set()
        if self._items:
            with self._lock:
                lost, self.dropped = len(self._items), self.dropped + len(self._items)
                self._items.clear()
                self._bytes = 0
            log.warning("%s: %d not exported at shutdown (receiver unreachable)", self.name, lost)
        else:
            self._thread.join(timeout=1.0)
        if self._close is not None:
            self._close()

    def stats(self) -> dict[str, int | float]:
        return {"queued": len(self._items), "queuedBytes": self._bytes, "exported": self.exported,
                "dropped": self.dropped, "failedExports": self.failures, "exportSeconds": round(self.export_s, 3)}


def span_size(span: ReadableSpan) -> int:
    """A span's string attributes, in characters: what dominates its encoded size."""
    return sum(len(value) for value in (span.attributes or {}).values() if isinstance(value, str))


def log_size(record: ReadableLogRecord) -> int:
    body = record.log_record.body
    return len(body) if isinstance(body, str) else 0


class QueueSpanProcessor(SpanProcessor):
    def __init__(self, queue: ExportQueue) -> None:
        self.queue = queue

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        pass

    def on_end(self, span: ReadableSpan) -> None:
        self.queue.put(span)

    def shutdown(self) -> None:
        self.queue.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return self.queue.flush(timeout_millis / 1000)


class QueueLogProcessor(LogRecordProcessor):
    def __init__(self, queue: ExportQueue) -> None:
        self.queue = queue

    def on_emit(self, log_record: ReadWriteLogRecord) -> None:
        resource = log_record.resource if log_record.resource is not None else Resource.create({})
        self.queue.put(ReadableLogRecord(log_record=log_record.log_record, resource=resource,
                                         instrumentation_scope=log_record.instrumentation_scope,
                                         limits=log_record.limits))

    def shutdown(self) -> None:
        self.queue.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return self.queue.flush(timeout_millis / 1000)
