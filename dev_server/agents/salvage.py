"""A crashed reply rebuilt from its recorded frames, so a crash keeps what the client saw.

While a reply streams, the runner checkpoints it into the thread at most once per
``checkpoint_interval_s``, and the recorder (``dev_server.streaming.recorder``) writes its frames
to the stream log within ~50 ms, the first text frame before the client gets it. A process
killed between two checkpoints leaves its frames behind, not its text: the stream stays
``active`` and stops heartbeating. The gateway's chores (``dev_server.factory``) then claim each
dead stream once, whichever process gets there first (``StreamLog.claim_dead``), turn its
frames back into the reply's parts here, and hand the reply to its agent's memory, which
stores it right after the user message it answers, marked ``interrupted``, unless the thread
already holds a longer copy or another answer to that message (``Memory.salvage_reply``).
"""

from __future__ import annotations

import json
import logging
from typing import Any

from dev_server.agents.registry import AgentRegistry
from dev_server.kernel.clock import Clock, now_iso
from dev_server.kernel.convert import assistant_message
from dev_server.kernel.events import DataPart
from dev_server.kernel.loop import ReplyParts
from dev_server.kernel.messages import Message
from dev_server.storage.stream_log import Chunk, StreamLog, StreamRow

log = logging.getLogger(__name__)


def reply_from_frames(row: StreamRow, chunks: list[Chunk], clock: Clock) -> Message | None:
    """The reply a stream's frames describe (stamped by ``clock``), or None when they hold nothing it generated."""
    reply_id, metadata = None, {}
    parts = ReplyParts()
    tools: dict[str, dict[str, Any]] = {}
    for _, data in chunks:
        if data == "[DONE]":
            continue
        chunk = json.loads(data)
        kind = chunk.get("type")
        if kind == "start":
            reply_id = chunk.get("messageId")
            metadata = {k: v for k, v in (chunk.get("messageMetadata") or {}).items()
                        if k in ("agentId", "model", "provider", "local")}
        elif kind == "start-step":
            parts.step()
        elif kind == "text-delta":
            parts.add_text(chunk.get("delta", ""))
        elif kind == "reasoning-delta":
            parts.add_reasoning(chunk.get("delta", ""))
        elif kind == "tool-input-available":
            tools[chunk["toolCallId"]] = chunk
        elif kind in ("tool-output-available", "tool-output-error") and chunk.get("toolCallId") in tools:
            call = tools.pop(chunk["toolCallId"])
            error = kind == "tool-output-error"
            parts.add_tool(call["toolCallId"], call.get("toolName", ""), call.get("input"),
                           chunk.get("errorText") if error else chunk.get("output"), error)
        elif isinstance(kind, str) and kind.startswith("data-") and not chunk.get("transient"):
            parts.add_data(DataPart(kind.removeprefix("data-"), chunk.get("data"), chunk.get("id")))
    for call in tools.values():  # a call whose result never came: kept as asked
        parts.add_pending_call(call["toolCallId"], call.get("toolName", ""), call.get("input"))
    if reply_id is None or parts.empty or row.thread_id is None:
        return None
    metadata.update(interrupted=True, salvaged=True, answers=row.message_id)
    return assistant_message(reply_id, row.thread_id, row.resource_id, parts.snapshot(), now_iso(clock), metadata)


async def salvage_dead_streams(stream_log: StreamLog, agents: AgentRegistry) -> int:
    """Rebuild the replies of the dead streams this call claims; how many were stored."""
    stored = 0
    for row in await stream_log.claim_dead():
        agent = agents.get(row.agent_id)
        if agent is None or agent.memory is None or row.thread_id is None or row.message_id is None:
            continue
        try:
            reply = reply_from_frames(row, await stream_log.all_chunks(row.stream_id), stream_log.clock)
            if reply is not None and await agent.memory.salvage_reply(row.thread_id, reply, row.message_id):
                stored += 1
                log.info("rebuilt the reply %s of thread %s from its recorded stream", reply.id, row.thread_id)
        except Exception as exc:  # claimed once: logged, the stream's frames stay until swept
            log.warning("rebuilding the reply of stream %s failed: %s", row.stream_id, exc)
    return stored
