"""Telemetry's export queue (``dev_server.observability.export_queue``).

When the process stops (issue 26, item 5): a gateway started alone (its studio not running,
or already stopped) took 2-6 s to stop: the queue's final flush went through the OTLP
exporter's own retries (a second each), and then waited for the worker thread, itself
inside such a retry. Now a receiver that refuses connections costs nothing at shutdown, and
a reachable one still gets everything, once.

Under load (issue 25): spans of long threads are large (a model generation's input is the
whole prompt, with Observational Memory the thread's unobserved window), so 10,000 queued
spans held hundreds of megabytes and one 512-span request outgrew the exporter's timeout.
The queue is bounded by bytes as well as items, batches by bytes too, and a backlog goes
out batch after batch.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from dev_server.observability.export_queue import ITEM_OVERHEAD, ExportQueue
from dev_server.observability.telemetry import accepts_connections
from tests.kit.chat import chat_and_drain
from tests.kit.traces import wait_for_traces
from tests.support import free_port


def test_a_stopping_queue_does_not_wait_for_a_receiver_that_refuses_connections() -> None:
    attempts: list[int] = []
    release = threading.Event()

    def export(batch: Any) -> bool:  # as the OTLP exporter does against a closed port: waits out its retries
        attempts.append(len(batch))
        release.wait(30)
        return False

    queue = ExportQueue("spans", export, lambda: False, interval_s=0.01)
    try:
        queue.put("span")
        deadline = time.monotonic() + 10
        while not attempts:  # the worker is inside its export
            assert time.monotonic() < deadline
            time.sleep(0.01)
        stopped = threading.Event()
        threading.Thread(target=lambda: (queue.shutdown(), stopped.set()), daemon=True).start()
        assert stopped.wait(10), "shutdown waited for the worker's export"  # the export would take 30 s
        assert attempts == [1] and queue.stats()["dropped"] == 1  # no second attempt, the span counted as lost
    finally:
        release.set()


def test_a_stopping_queue_flushes_everything_once_to_a_reachable_receiver() -> None:
    sent: list[Any] = []
    release = threading.Event()

    def export(batch: Any) -> bool:
        if not sent:  # the worker's first export is still in flight when the flush starts
            release.wait(10)
        sent.extend(batch)
        return True

    queue = ExportQueue("spans", export, lambda: True, batch_size=2, interval_s=0.01)
    for item in range(5):
        queue.put(item)
    time.sleep(0.05)  # let the worker take its first batch
    threading.Timer(0.2, release.set).start()
    queue.shutdown()
    assert sorted(sent) == [0, 1, 2, 3, 4] and len(sent) == 5  # nothing lost, nothing sent twice
    stats = queue.stats()
    assert {key: stats[key] for key in ("queued", "exported", "dropped", "failedExports")} == {
        "queued": 0, "exported": 5, "dropped": 0, "failedExports": 0}


def test_the_receiver_check_tells_a_closed_port_from_a_listening_one() -> None:
    import socket

    assert accepts_connections(f"http://127.0.0.1:{free_port()}/v1/traces")() is False
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        assert accepts_connections(f"http://127.0.0.1:{listening.getsockname()[1]}/v1/traces")() is True


def test_a_gateway_stopped_right_after_a_turn_still_delivers_it_to_a_running_studio(start_server: Any) -> None:
    studio_port = free_port()
    studio = start_server("studio", port=studio_port)
    gateway = start_server("gateway", env={"DEV_SERVER_STUDIO_PORT": str(studio_port)})
    chat_and_drain(gateway, "stopped-at-once")
    assert gateway.stop() == 0  # its spans and logs were still queued: the flush at shutdown sends them
    traces = wait_for_traces(studio, lambda ts: "stopped-at-once" in {t["threadId"] for t in ts})
    assert [t["status"] for t in traces if t["threadId"] == "stopped-at-once"] == ["success"]
    assert "not exported at shutdown" not in gateway.output()


def wait_until(predicate, timeout_s: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


def test_the_queue_is_bounded_by_bytes_and_drops_the_oldest():
    queue = ExportQueue("test", lambda batch: False, max_items=1_000, max_bytes=10_000, size=len,
                        interval_s=3600)  # the receiver is down: nothing leaves
    try:
        for i in range(20):
            queue.put(f"{i:04d}" + "x" * 996)  # 1,000 characters each
        stats = queue.stats()
        per_item = 1_000 + ITEM_OVERHEAD
        assert stats["queued"] == 10_000 // per_item and stats["dropped"] == 20 - stats["queued"]
        assert stats["queuedBytes"] == stats["queued"] * per_item <= 10_000
        assert [item[:4] for item, _ in queue._items] == [f"{i:04d}" for i in range(20 - stats["queued"], 20)]
    finally:
        queue.shutdown(timeout_s=0)


def test_an_item_larger_than_the_bound_still_queues_alone():
    queue = ExportQueue("test", lambda batch: False, max_bytes=1_000, size=len, interval_s=3600)
    try:
        queue.put("a" * 10)
        queue.put("b" * 5_000)
        assert queue.stats()["queued"] == 1 and queue.stats()["dropped"] == 1
    finally:
        queue.shutdown(timeout_s=0)


def test_a_batch_is_bounded_by_bytes_and_holds_at_least_one_item():
    batches: list[list[str]] = []
    gate = threading.Event()

    def export(batch):
        gate.wait(10)  # everything is queued before the first batch is cut
        batches.append(list(batch))
        return True

    # an hour's interval: only a full batch (by bytes here) wakes the worker
    queue = ExportQueue("test", export, batch_size=512, batch_bytes=5_000, size=len, interval_s=3600)
    try:
        for i in range(10):
            queue.put(f"{i}" * 2_000)  # 2,256 bytes each with the overhead: two fit in 5,000
        queue.put("z" * 20_000)  # alone over the bound: a batch of its own
        gate.set()
        assert wait_until(lambda: queue.stats()["exported"] == 11)
    finally:
        queue.shutdown()
    items = [f"{i}" * 2_000 for i in range(10)]
    assert batches == [items[i:i + 2] for i in range(0, 10, 2)] + [["z" * 20_000]]


def test_a_backlog_goes_out_batch_after_batch_without_waiting_the_interval():
    """Five full batches wait behind a slow first export. The worker sends them one after
    another; the interval (an hour here) is only for a batch that is not full yet. The wait
    below is a deadline, not a measurement: the five batches take milliseconds, waiting the
    interval between them would take hours."""
    sent: list[int] = []
    gate = threading.Event()

    def export(batch):
        gate.wait(10)
        sent.append(len(batch))
        return True

    queue = ExportQueue("test", export, batch_size=100, interval_s=3600)
    try:
        for i in range(500):
            queue.put(i)
        gate.set()
        assert wait_until(lambda: queue.stats()["exported"] == 500), sent
        assert sent == [100] * 5
    finally:
        queue.shutdown(timeout_s=0)


def test_stats_count_the_time_spent_exporting():
    def export(batch):
        time.sleep(0.05)
        return True

    queue = ExportQueue("test", export, batch_size=1, interval_s=0.01)
    try:
        queue.put("a")
        queue.put("b")
        assert wait_until(lambda: queue.stats()["exported"] == 2)
        stats = queue.stats()
        assert stats["exportSeconds"] >= 0.1 and stats["queuedBytes"] == 0 and stats["failedExports"] == 0
    finally:
        queue.shutdown()
