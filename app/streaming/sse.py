"""Server-sent events framing shared by both streams: ``data: <json>\\n\\n``, ending ``[DONE]``."""

from __future__ import annotations

import json
from typing import Any

DONE = "[DONE]"

STREAM_HEADERS = {
    "Cache-Control": "no-cache",
    "Connection": "keep-alive",
    "X-Accel-Buffering": "no",
}
UI_STREAM_HEADERS = {**STREAM_HEADERS, "x-vercel-ai-ui-message-stream": "v1"}


def encode(chunk: dict[str, Any]) -> str:
    return json.dumps(chunk, separators=(",", ":"), ensure_ascii=False)
