"""The bare baseline of bench/workload.py: the same routes, the same bytes, nothing else.

``POST /api/chat`` is a plain ``StreamingResponse`` of one of our recorded replies: the
body chunks exactly as our gateway sent them (already encoded SSE bytes, so nothing is
encoded here), with our response headers. The list and messages pages are our recorded
JSON bodies with our headers. It runs under the same uvicorn settings as ``python -m dev_server``
(uvloop, httptools, a TCP socket bound with TCP_NODELAY, keep-alive), so a ratio to it is
what our code costs on top of the framework and the server.

Run: ``python bench/bare_server.py PORT CANNED_JSON`` (written by ``bench.canned.record``).
"""

from __future__ import annotations

import contextlib
import json
import socket
import sys

import uvicorn
import uvloop
from fastapi import FastAPI, Request, Response
from fastapi.responses import StreamingResponse

KEEP_ALIVE_S = 75  # dev_server.settings' default keep_alive_s


def build(canned: dict) -> FastAPI:
    chat_chunks = [chunk.encode("latin-1") for chunk in canned["chat"]["chunks"]]
    chat_headers = dict(canned["chat"]["headers"])
    pages = {name: (canned[name]["body"].encode("latin-1"), dict(canned[name]["headers"]))
             for name in ("threads", "messages")}
    app = FastAPI()

    @app.get("/health")
    async def health() -> dict:
        return {"status": "ok"}

    @app.post("/api/chat")
    async def chat(request: Request) -> StreamingResponse:
        await request.body()

        async def body():
            for chunk in chat_chunks:
                yield chunk

        return StreamingResponse(body(), headers=chat_headers)

    @app.get("/api/memory/threads")
    async def threads() -> Response:
        return Response(pages["threads"][0], headers=pages["threads"][1])

    @app.get("/api/memory/threads/{thread_id}/messages")
    async def messages(thread_id: str) -> Response:
        return Response(pages["messages"][0], headers=pages["messages"][1])

    return app


def bind(port: int) -> socket.socket:
    """As ``dev_server.__main__.bind``: proto TCP, so the accepted sockets get TCP_NODELAY."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind(("127.0.0.1", port))
    return sock


async def serve(port: int, canned: dict) -> None:
    config = uvicorn.Config(build(canned), http="httptools", log_config=None, log_level="warning",
                            access_log=False, timeout_graceful_shutdown=3, timeout_keep_alive=KEEP_ALIVE_S)
    await uvicorn.Server(config).serve(sockets=[bind(port)])


if __name__ == "__main__":
    with open(sys.argv[2]) as file:
        recorded = json.load(file)
    with contextlib.suppress(KeyboardInterrupt):
        uvloop.run(serve(int(sys.argv[1]), recorded))
