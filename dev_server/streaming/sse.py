"""Server-sent events framing shared by both streams: ``data: <json>\\n\\n``, ending ``[DONE]``.

``encode`` must never fail: the frame is turned into UTF-8 bytes by sse-starlette *after*
our generator yielded it, where an error can only drop the connection (no ``error``
chunk, no ``[DONE]``). UTF-8 cannot encode a lone UTF-16 surrogate (``"\\ud800"`` is
valid JSON, so one can arrive in a request, come back from storage, or be echoed by a
model), so ``repair_text`` (``dev_server.kernel.text``) replaces each with U+FFFD.
Nor can a number JSON has no form for (an infinity, an integer too long to write out) fail
it or reach the client as invalid JSON: ``dev_server.kernel.json_text``.
"""

from __future__ import annotations

from typing import Any

from dev_server.kernel.json_text import Encoder
from dev_server.kernel.text import repair_text

DONE = "[DONE]"

STREAM_HEADERS = {
    "Cache-Control": "no-cache",
    "Connection": "keep-alive",
    "X-Accel-Buffering": "no",
}
UI_STREAM_HEADERS = {**STREAM_HEADERS, "x-vercel-ai-ui-message-stream": "v1"}


_CHUNK_JSON = Encoder(separators=(",", ":"), ensure_ascii=False, default=str)  # strict JSON, dev_server.kernel.json_text


def encode(chunk: dict[str, Any]) -> str:
    return repair_text(_CHUNK_JSON.encode(chunk))
