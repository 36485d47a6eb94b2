"""Mastra's own stream chunks, what the Studio and ``@mastra/client-js`` read (Mastra's Studio REST contract 4.3).

Every chunk is ``{type, runId, from: "AGENT", payload}``. The shapes live here; the walk
from a run's events to these chunks is ``dev_server.api.studio.run_chunks.encode_run`` (the
streaming layer sits below the agents layer and never imports it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dev_server.kernel.model import ResolvedModel, Usage
from dev_server.kernel.stream_errors import StreamError


@dataclass(frozen=True)
class RunIds:
    """Who is speaking in a run's chunks."""

    run_id: str
    message_id: str  # the assistant message that will be stored
    agent_id: str
    model: ResolvedModel


def chunk(kind: str, run_id: str, payload: dict[str, Any]) -> dict[str, Any]:
    return {"type": kind, "runId": run_id, "from": "AGENT", "payload": payload}


def error_chunk(run_id: str, error: StreamError) -> dict[str, Any]:
    return chunk("error", run_id, {"error": {"name": error.kind, "message": error.message}})


def usage_payload(usage: Usage | None) -> dict[str, int]:
    if usage is None:
        return {"inputTokens": 0, "outputTokens": 0, "totalTokens": 0}
    return {"inputTokens": usage.input_tokens, "outputTokens": usage.output_tokens,
            "totalTokens": usage.input_tokens + usage.output_tokens}
