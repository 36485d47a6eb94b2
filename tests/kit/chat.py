"""Chat turns against ``/api/chat`` (the AI SDK's UI message stream over SSE).

Two ways to run a turn, with the same arguments and the same result:

* ``chat_turn``: the request ``DefaultChatTransport`` makes, the stream read in Python
  (``tests.support.frames_of`` / ``ui_chunks``, the message built by ``tests.kit.ui_stream``).
  For feature tests: no node process per turn.
* ``judge``: the real ``ai`` package (``tests/js/chat_client.mjs``) makes the request and
  validates every chunk with its own schema. For tests whose subject is the wire format.

The result is a dict: ``ok``, ``aborted``, ``chunks``, ``message`` (the assistant message
``useChat`` would show), ``error``, ``errorChunks`` (the text of each ``error`` chunk),
``status``, ``headers``. ``turn`` / ``judged_turn`` are the one-message shorthand.
"""

from __future__ import annotations

import json
import time
from typing import Any

import httpx

from tests.kit.local_http import local_http
from tests.kit.ui_stream import StreamError, build_message
from tests.support import frames_of, run_node, user_message, wait_until

CHAT = "/api/chat"


def url_of(server: Any) -> str:
    return server if isinstance(server, str) else server.url


def chat_request(messages: list[dict[str, Any]], *, body: dict[str, Any] | None = None, chat_id: str = "chat-test",
                 trigger: str = "submit-message", message_id: str | None = None) -> dict[str, Any]:
    """The JSON body ``DefaultChatTransport.sendMessages`` posts."""
    return {**(body or {}), "id": chat_id, "messages": messages, "trigger": trigger,
            **({"messageId": message_id} if message_id is not None else {})}


def chat_turn(server: Any, messages: list[dict[str, Any]], *, body: dict[str, Any] | None = None,
              headers: dict[str, str] | None = None, trigger: str = "submit-message", chat_id: str = "chat-test",
              message_id: str | None = None, api: str = CHAT, abort_after: int | None = None,
              timeout: float = 60.0) -> dict[str, Any]:
    """One turn read in Python (see the module docstring); ``abort_after``: hang up after
    that many chunks (``aborted`` is then true)."""
    out: dict[str, Any] = {"ok": False, "aborted": False, "chunks": [], "message": None, "error": None,
                           "errorChunks": [], "status": None, "headers": None}
    request = chat_request(messages, body=body, chat_id=chat_id, trigger=trigger, message_id=message_id)
    with local_http.stream("POST", f"{url_of(server)}{api}", json=request, headers=headers or {},
                      timeout=timeout) as response:
        out["status"], out["headers"] = response.status_code, dict(response.headers)
        if not response.is_success:
            out["error"] = response.read().decode(errors="replace")
            return out
        # with abort_after, stop reading there: leaving the ``with`` closes the connection
        for _, data in frames_of(response, abort_after):
            if data == "[DONE]":
                continue
            chunk = json.loads(data)
            out["chunks"].append(chunk)
            if chunk["type"] == "error":
                out["errorChunks"].append(chunk.get("errorText"))
        out["aborted"] = abort_after is not None and len(out["chunks"]) >= abort_after
    try:
        out["message"] = build_message(out["chunks"], messages)
    except StreamError as error:
        out["error"] = str(error)
    out["ok"] = out["error"] is None
    return out


def judge(server: Any, messages: list[dict[str, Any]] | None = None, *, body: dict[str, Any] | None = None,
          headers: dict[str, str] | None = None, trigger: str = "submit-message", chat_id: str = "chat-test",
          message_id: str | None = None, api: str = CHAT, abort_after: int | None = None, raw: bool = False,
          reconnect: bool = False, timeout_ms: int | None = None) -> dict[str, Any]:
    """The same turn made and judged by the real ``ai`` package (one node process); ``raw``:
    plain fetch + the SDK's event-stream parser (adds ``rawText``); ``reconnect``: only
    ``transport.reconnectToStream`` (adds ``reconnected``). Contract: ``tests/js/chat_client.mjs``."""
    payload: dict[str, Any] = {"api": f"{url_of(server)}{api}", "messages": messages or [], "body": body or {},
                               "headers": headers or {}, "trigger": trigger, "chatId": chat_id}
    optional = {"messageId": message_id, "abortAfterChunks": abort_after, "timeoutMs": timeout_ms,
                "raw": raw or None, "reconnect": reconnect or None}
    payload.update({k: v for k, v in optional.items() if v is not None})
    return run_node("chat_client.mjs", payload)


def turn(server: Any, thread: str, message_id: str, text: str, **options: Any) -> dict[str, Any]:
    """One user message on ``thread`` (``conversationId``), read in Python; it must succeed."""
    result = chat_turn(server, [user_message(message_id, text)], body={"conversationId": thread}, chat_id=thread,
                       **options)
    assert result["ok"], result["error"]
    return result


def judged_turn(server: Any, thread: str, message_id: str, text: str, **options: Any) -> dict[str, Any]:
    """``turn`` made and judged by the real ``ai`` package."""
    result = judge(server, [user_message(message_id, text)], body={"conversationId": thread}, chat_id=thread,
                   **options)
    assert result["ok"], result["error"]
    return result


def reply_text(result: dict[str, Any]) -> str:
    """The text parts of a turn's assistant message."""
    return "".join(p.get("text", "") for p in result["message"]["parts"] if p["type"] == "text")


def streamed_text(chunks: list[dict[str, Any]]) -> str:
    """The text deltas of a turn's chunks (its new text only, whatever history it continued)."""
    return "".join(c["delta"] for c in chunks if c["type"] == "text-delta")


def text_of(frames: list[tuple[int, str]]) -> str:
    """The text deltas of SSE frames (``frames_of``)."""
    return streamed_text([json.loads(data) for _, data in frames if data != "[DONE]"])


def post_chat(url: str, chat_id: str, text: str, *, headers: dict | None = None, path: str = CHAT,
              read_frames: int | None = None) -> list[tuple[int, str]]:
    """POST a message on thread ``chat_id``; the (id, data) frames read, all of them or the
    first ``read_frames`` (then the client hangs up)."""
    body = {"id": chat_id, "conversationId": chat_id, "messages": [user_message(f"{chat_id}-u", text)]}
    with local_http.stream("POST", f"{url}{path}", json=body, headers=headers or {}, timeout=30) as response:
        assert response.status_code == 200, response.read()
        return frames_of(response, read_frames)


def resume(url: str, chat_id: str, *, path: str = CHAT, headers: dict | None = None
           ) -> tuple[httpx.Response, list[tuple[int, str]]]:
    """``GET .../{chat_id}/stream``: the response and, on 200, its frames."""
    with local_http.stream("GET", f"{url}{path}/{chat_id}/stream", headers=headers or {}, timeout=30) as response:
        if response.status_code != 200:
            response.read()
            return response, []
        return response, frames_of(response)


def chat_and_drain(server: Any, conversation: str, text: str = "my name is Ada") -> None:
    """One turn on ``conversation`` read to its end, nothing asserted but the 200 (a new
    message id each call)."""
    with local_http.stream("POST", f"{url_of(server)}{CHAT}", timeout=30,
                      json={"id": "c", "conversationId": conversation,
                            "messages": [user_message(f"{conversation}-{time.monotonic_ns()}", text)]}) as response:
        assert response.status_code == 200
        response.read()


def recorded_through(rows, chat_id: str, seq: int, timeout: float = 30) -> None:
    """Wait until the recorder stored the stream of ``chat_id`` up to frame ``seq``: only the
    first text is stored before it is sent; later frames go out in the recorder's next flush.
    ``rows(sql, params)``: a query on the database the recorder writes to."""
    sql = ("SELECT coalesce(max(c.seq), 0) FROM stream_chunks c JOIN chat_streams s USING (stream_id)"
           " WHERE s.chat_id = ?")
    wait_until(lambda: rows(sql, (chat_id,))[0][0] >= seq, timeout, seen=lambda: rows(sql, (chat_id,)))


class ReadChunks:
    """The chunks of a stream read in a thread of the test: ``chunks`` fills as they arrive."""

    def __init__(self) -> None:
        self.chunks: list[dict] = []

    def collect(self, lines) -> None:
        for line in lines:
            if line.startswith("data: {"):
                self.chunks.append(json.loads(line[6:]))

    def types(self) -> list[str]:
        return [c["type"] for c in self.chunks]

    def wait_for(self, kind: str, timeout: float = 30) -> None:
        wait_until(lambda: kind in self.types(), timeout, poll_s=0.02, seen=self.types)
