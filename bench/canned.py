"""Record our servers' responses byte for byte, for the bare server to replay (bench/bare_server.py).

A response is read over a plain socket so the HTTP/1.1 chunk boundaries are kept: each
chunk is one body ``send`` of the server, so the bare server can send the same body in the
same pieces. ``same`` then checks that the bare server's answer is byte-identical.
"""

from __future__ import annotations

import json
import socket
from dataclasses import dataclass, field

# Set by uvicorn on every response of either server, or by the framework from the body.
_PER_RESPONSE = {"date", "server", "transfer-encoding", "content-length"}


@dataclass
class Raw:
    status: int
    headers: list[tuple[str, str]]
    chunks: list[bytes] = field(default_factory=list)

    @property
    def body(self) -> bytes:
        return b"".join(self.chunks)

    def replayable(self) -> dict:
        """Headers and body chunks as JSON-safe text (latin-1 maps bytes 1:1)."""
        return {"headers": [(k, v) for k, v in self.headers if k.lower() not in _PER_RESPONSE],
                "chunks": [chunk.decode("latin-1") for chunk in self.chunks],
                "body": self.body.decode("latin-1")}


def request(base: str, method: str, path: str, body: dict | None = None) -> Raw:
    """One request on a keep-alive connection (as the load generator sends them), read to the
    end of its body."""
    host, port = base.removeprefix("http://").split(":")
    payload = b"" if body is None else json.dumps(body).encode()
    head = (f"{method} {path} HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: keep-alive\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n\r\n").encode()
    with socket.create_connection((host, int(port)), timeout=120) as sock:
        sock.sendall(head + payload)
        data = b""

        def need(size: int) -> None:
            nonlocal data
            while len(data) < size:
                chunk = sock.recv(65536)
                if not chunk:
                    raise ConnectionError(f"{base}{path}: connection closed mid-response")
                data += chunk

        while b"\r\n\r\n" not in data:
            need(len(data) + 1)
        header_block, _, data = data.partition(b"\r\n\r\n")
        lines = header_block.decode("latin-1").split("\r\n")
        headers = [tuple(part.strip() for part in line.split(":", 1)) for line in lines[1:]]
        raw = Raw(int(lines[0].split()[1]), headers)  # type: ignore[arg-type]
        values = {k.lower(): v for k, v in headers}
        if values.get("transfer-encoding", "").lower() == "chunked":
            while True:
                while b"\r\n" not in data:
                    need(len(data) + 1)
                size_line, _, data = data.partition(b"\r\n")
                size = int(size_line.split(b";")[0], 16)
                need(size + 2)
                if size == 0:
                    break
                raw.chunks.append(data[:size])
                data = data[size + 2:]
        else:
            need(int(values.get("content-length", "0")))
            raw.chunks.append(data)
    return raw


def same(ours: Raw, bare: Raw) -> list[str]:
    """What differs between two responses (status, headers but the per-response ones, body
    bytes, chunking); empty when the bare server replays ours exactly."""
    problems = []
    if ours.status != bare.status:
        problems.append(f"status {ours.status} != {bare.status}")

    def kept(raw: Raw) -> list[tuple[str, str]]:
        return sorted((k.lower(), v) for k, v in raw.headers if k.lower() not in _PER_RESPONSE - {"transfer-encoding"})

    if kept(ours) != kept(bare):
        problems.append(f"headers {kept(ours)} != {kept(bare)}")
    if ours.body != bare.body:
        problems.append(f"body differs ({len(ours.body)} vs {len(bare.body)} bytes)")
    elif [len(c) for c in ours.chunks] != [len(c) for c in bare.chunks]:
        problems.append(f"chunking differs: {[len(c) for c in ours.chunks]} vs {[len(c) for c in bare.chunks]}")
    return problems
