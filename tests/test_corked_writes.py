"""A connection's writes within one loop turn go out as one (``CorkedWrites`` in
``dev_server.connection_limits``), on real sockets and asyncio's own transports; and a
server answering real requests with them keeps every response whole and in order."""

from __future__ import annotations

import asyncio
import socket

import httpx

from dev_server.connection_limits import CorkedWrites
from tests.kit.servers import server_fixture

gateway = server_fixture("gateway")


async def _corked_pair() -> tuple[CorkedWrites, socket.socket]:
    ours, theirs = socket.socketpair()
    loop = asyncio.get_running_loop()
    transport, _ = await loop.create_connection(asyncio.Protocol, sock=ours)
    theirs.setblocking(False)
    return CorkedWrites(transport, loop), theirs


def test_the_writes_of_one_loop_turn_are_sent_together_and_in_order() -> None:
    async def run() -> tuple[bytes, bytes]:
        corked, theirs = await _corked_pair()
        corked.write(b"HTTP/1.1 200 OK\r\n\r\n")
        corked.write(b'{"a": 1}')
        assert corked.get_write_buffer_size() == 27  # pending, not sent yet
        await asyncio.sleep(0)  # the turn ends: one send
        await asyncio.sleep(0.05)
        first = theirs.recv(1 << 16)
        corked.write(b"later")
        corked.close()  # what is pending is sent before the close
        await asyncio.sleep(0.05)
        rest = theirs.recv(1 << 16)
        assert theirs.recv(1 << 16) == b""  # closed
        theirs.close()
        return first, rest

    first, rest = asyncio.run(run())
    assert first == b'HTTP/1.1 200 OK\r\n\r\n{"a": 1}'
    assert rest == b"later"


def test_a_write_left_pending_when_the_connection_is_lost_is_dropped_quietly() -> None:
    async def run() -> None:
        corked, theirs = await _corked_pair()
        corked.write(b"never sent")
        corked.transport.abort()
        await asyncio.sleep(0.05)  # the flush finds the transport closing: nothing raised
        assert corked.is_closing()
        theirs.close()

    asyncio.run(run())


def test_keep_alive_requests_get_whole_responses_in_order(gateway) -> None:
    with httpx.Client(base_url=gateway.url, timeout=30) as http:  # one connection, reused
        for _ in range(20):
            response = http.get("/health")
            assert response.status_code == 200 and response.json()["status"] in ("ok", "starting")
    with socket.create_connection(("127.0.0.1", gateway.port), timeout=10) as sock:  # pipelined
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n" * 3)
        received = b""
        while received.count(b"HTTP/1.1 200") < 3:
            chunk = sock.recv(1 << 16)
            assert chunk, received
            received += chunk
    assert received.count(b"HTTP/1.1 200") == 3
