"""Slow clients and floods against a real gateway process (``dev_server.connection_limits``).

Read deadlines: a connection that sends half a request line and headers, or its headers
with a ``Content-Length`` and then only part of the body, is answered 408 (JSON) and
closed once its deadline passes, however many of them there are, and a normal request
is served meanwhile. The deadline is for the whole headers (or body), not for a gap
between two reads, so trickling a byte at a time does not extend it. The connection cap
refuses (503, JSON, ``Retry-After``) a request beyond it, rather than queueing it.

These tests measure time because the behaviour is a deadline: the server runs with a 1 s
one, and a connection must be closed after it and within a generous bound (10 s here, for
a machine shared with other work), never left open.
"""

from __future__ import annotations

import json
import socket
import time

import pytest

from tests.kit.local_http import local_http
from tests.kit.servers import server_fixture

pytestmark = pytest.mark.slow

DEADLINE_S = 1.0
BOUND_S = 10.0  # generous: the machine is shared; without the deadlines nothing is ever closed
SLOW = 60  # of each kind, as in the report


def connect(port: int, data: bytes) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=BOUND_S + 5)
    if data:
        sock.sendall(data)
    return sock


def read_until_closed(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (a timeout fails the test)."""
    received = b""
    try:
        while chunk := sock.recv(65536):
            received += chunk
    except TimeoutError:
        raise AssertionError(f"the server kept the connection open; received {received!r}") from None
    finally:
        sock.close()
    return received


def response_of(raw: bytes) -> tuple[int, dict[str, str], bytes]:
    head, _, body = raw.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.lower().split(": ", 1) for line in lines)
    return int(status_line.split()[1]), headers, body


SLOW_HEADERS = b"POST /api/chat HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: applicat"
SLOW_BODY = (b"POST /api/chat HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
             b"Content-Length: 5000\r\n\r\n{\"messages\": [")


gateway = server_fixture("gateway", env={"DEV_SERVER_HEADER_TIMEOUT_S": str(DEADLINE_S),
                                         "DEV_SERVER_BODY_TIMEOUT_S": str(DEADLINE_S)})


def test_slow_headers_and_slow_bodies_are_closed_at_their_deadline_while_health_answers(gateway):
    started = time.monotonic()
    slow_headers = [connect(gateway.port, SLOW_HEADERS) for _ in range(SLOW)]
    slow_bodies = [connect(gateway.port, SLOW_BODY) for _ in range(SLOW)]
    silent = [connect(gateway.port, b"") for _ in range(5)]  # connected, never sent a byte

    health = local_http.get(f"{gateway.url}/health", timeout=5)  # served while 125 connections stall
    assert health.status_code == 200 and health.json()["role"] == "gateway"

    for kind, socks, error in (("headers", slow_headers, "Request headers not received within 1 s"),
                               ("body", slow_bodies, "Request body not received within 1 s")):
        for sock in socks:
            status, headers, body = response_of(read_until_closed(sock))
            assert status == 408, kind
            assert headers["content-type"] == "application/json" and headers["connection"] == "close"
            assert json.loads(body) == {"error": error}
    for sock in silent:
        assert read_until_closed(sock) == b""  # closed without an answer: it never asked anything
    elapsed = time.monotonic() - started
    assert DEADLINE_S <= elapsed < BOUND_S, elapsed
    output = gateway.output()
    assert "request headers not complete within 1.0 s" in output and "request body not complete" in output


def test_trickling_a_byte_at_a_time_does_not_extend_the_deadline(gateway):
    # Each byte arrives well within any per-read timeout; the headers as a whole never do.
    sock = connect(gateway.port, b"G")
    started = time.monotonic()
    closed_at = None
    for byte in b"ET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 200:
        time.sleep(0.1)
        try:
            sock.sendall(bytes([byte]))
        except (BrokenPipeError, ConnectionResetError):
            closed_at = time.monotonic() - started
            break
        if time.monotonic() - started > BOUND_S:
            break
    if closed_at is None:
        status, _, _ = response_of(read_until_closed(sock))
        assert status == 408
        closed_at = time.monotonic() - started
    else:
        sock.close()
    assert closed_at < BOUND_S


def test_a_kept_alive_connection_stalling_on_its_next_request_is_closed(gateway):
    sock = connect(gateway.port, b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    first = b""
    while b"\r\n\r\n" not in first or not first.rstrip().endswith(b"}"):
        first += sock.recv(65536)
    assert first.startswith(b"HTTP/1.1 200")
    sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nAcce")  # the next request, never finished
    started = time.monotonic()
    status, _, body = response_of(read_until_closed(sock))
    assert status == 408 and json.loads(body)["error"].startswith("Request headers not received")
    assert time.monotonic() - started < BOUND_S


def test_a_pipelined_request_with_a_stalled_body_is_cut_off_after_the_one_before(gateway):
    sock = connect(gateway.port, b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" + SLOW_BODY)
    started = time.monotonic()
    received = read_until_closed(sock)
    assert received.startswith(b"HTTP/1.1 200") and received.count(b"HTTP/1.1 ") == 2
    status, _, body = response_of(received[received.rindex(b"HTTP/1.1 "):])
    assert status == 408 and json.loads(body)["error"].startswith("Request body not received")
    assert time.monotonic() - started < BOUND_S


def test_a_request_within_its_deadlines_is_unaffected(gateway):
    # Headers, then the body a little later: each part arrives within its deadline.
    payload = json.dumps({"messages": [{"id": "m1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}],
                          "conversationId": "slow-but-fine"}).encode()
    sock = connect(gateway.port, b"POST /api/chat HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                   b"Connection: close\r\nContent-Length: %d\r\n\r\n" % len(payload))
    time.sleep(DEADLINE_S / 2)
    sock.sendall(payload)
    status, headers, body = response_of(read_until_closed(sock))
    assert status == 200 and headers["content-type"].startswith("text/event-stream")
    assert b"[DONE]" in body


def test_the_connection_cap_refuses_requests_beyond_it_with_a_json_503(start_server):
    gateway = start_server("gateway", env={"DEV_SERVER_MAX_CONNECTIONS": "5", "DEV_SERVER_HEADER_TIMEOUT_S": "60"})
    held = [connect(gateway.port, b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n") for _ in range(5)]
    time.sleep(0.3)  # accepted by the server (an idle connection counts as much as a busy one)

    refused = local_http.get(f"{gateway.url}/health", timeout=5)
    assert refused.status_code == 503
    assert refused.headers["retry-after"] == "1" and refused.headers["connection"] == "close"
    assert refused.json() == {"error": "The server is at its connection limit; retry shortly"}

    # Refused, not queued: the held connections are still served, and one closing frees a slot.
    held[0].sendall(b"\r\n")
    first = held[0].recv(65536)
    assert first.startswith(b"HTTP/1.1 200"), gateway.output()
    held.pop(0).close()
    deadline = time.monotonic() + BOUND_S
    while (answer := local_http.get(f"{gateway.url}/health", timeout=5)).status_code == 503:
        assert time.monotonic() < deadline, "a closed connection never freed its slot"
        time.sleep(0.05)
    assert answer.status_code == 200
    for sock in held:
        sock.close()
    assert "over the cap of 5 connections" in gateway.output()


def test_the_studio_cuts_off_a_slow_otlp_body_it_reads_itself_without_an_error(start_server):
    # The OTLP receiver reads protobuf bodies itself (the input check passes them through):
    # the cut-off reaches it as a client disconnect, which is no error of the server's.
    studio = start_server("studio", env={"DEV_SERVER_HEADER_TIMEOUT_S": str(DEADLINE_S),
                                         "DEV_SERVER_BODY_TIMEOUT_S": str(DEADLINE_S)})
    started = time.monotonic()
    slow = [connect(studio.port, b"POST /v1/traces HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                    b"Content-Type: application/x-protobuf\r\nContent-Length: 4000\r\n\r\n\x0a\x8f"),
            connect(studio.port, SLOW_HEADERS.replace(b"/api/chat", b"/api/agents/chat-agent/stream"))]
    for sock in slow:
        status, headers, _ = response_of(read_until_closed(sock))
        assert status == 408 and headers["content-type"] == "application/json"
    assert time.monotonic() - started < BOUND_S
    assert local_http.get(f"{studio.url}/health", timeout=5).status_code == 200
    output = studio.output()
    assert "request body not complete within 1.0 s" in output
    assert "request headers not complete within 1.0 s" in output
    assert "Traceback" not in output and "unhandled error" not in output
