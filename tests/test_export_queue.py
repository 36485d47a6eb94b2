"""Telemetry's export queue when the process stops (issue 26, item 5).

A gateway started alone (its studio not running, or already stopped) took 2-6 s to stop:
the queue's final flush went through the OTLP exporter's own retries (a second each), and
then waited for the worker thread, itself inside such a retry. Now a receiver that refuses
connections costs nothing at shutdown, and a reachable one still gets everything, once.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from app.observability.export_queue import ExportQueue
from app.observability.telemetry import accepts_connections
from tests.support import free_port
from tests.test_observability import chat_gateway, wait_for_traces


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
    assert queue.stats() == {"queued": 0, "exported": 5, "dropped": 0, "failedExports": 0}


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
    chat_gateway(gateway, "stopped-at-once")
    assert gateway.stop() == 0  # its spans and logs were still queued: the flush at shutdown sends them
    traces = wait_for_traces(studio, lambda ts: "stopped-at-once" in {t["threadId"] for t in ts})
    assert [t["status"] for t in traces if t["threadId"] == "stopped-at-once"] == ["success"]
    assert "not exported at shutdown" not in gateway.output()
