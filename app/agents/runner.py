"""One agent turn, independent of the wire format it is streamed in.

``prepare`` does everything that can fail cleanly before a response starts: it opens the
thread inside its resource, stores the user's message (so a crash mid-stream cannot lose
it), and builds the model context from storage. ``run`` streams the model's events and,
in a ``finally`` that also runs when the client disconnects, stores the reply: complete,
or what was generated so far marked ``interrupted``. The gateway (AI SDK stream) and the
studio (Mastra chunks) both encode the same events.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import anyio

from app.agents.registry import RegisteredAgent
from app.clock import now_iso
from app.llm import Finish, LLMClient, ModelProviderError, ModelRequest, ResolvedModel, TextDelta
from app.memory.convert import assistant_message, stored_to_model
from app.storage.conversations import Message, Thread


def new_id(prefix: str = "") -> str:
    return f"{prefix}{uuid.uuid4()}"


@dataclass
class Turn:
    agent: RegisteredAgent
    model: ResolvedModel
    context: list[dict[str, Any]]
    thread: Thread | None
    resource_id: str | None
    reply_id: str = field(default_factory=new_id)
    run_id: str = field(default_factory=new_id)
    user_message_id: str | None = None
    # filled in while running
    text: str = ""
    finish: Finish | None = None
    error: ModelProviderError | None = None
    interrupted: bool = False

    def reply_metadata(self) -> dict[str, Any]:
        metadata: dict[str, Any] = {"modelId": self.model.model_id, "provider": self.model.provider,
                                    "runId": self.run_id, "agentId": self.agent.id}
        if self.model.is_local:
            metadata["local"] = True
        if self.finish is not None:
            metadata["finishReason"] = self.finish.finish_reason
            metadata["usage"] = {"inputTokens": self.finish.usage.input_tokens,
                                 "outputTokens": self.finish.usage.output_tokens}
        if self.interrupted:
            metadata["interrupted"] = True
        if self.error is not None:
            metadata["error"] = {"kind": self.error.kind, "message": self.error.message}
        return metadata


class TurnRunner:
    def __init__(self, llm: LLMClient) -> None:
        self.llm = llm

    async def prepare(self, agent: RegisteredAgent, *, thread_id: str | None, resource_id: str,
                      incoming: list[Message], client_context: list[dict[str, Any]]) -> Turn:
        """Open the thread and store the turn's input (memory agents), or use the client's context."""
        model = self.llm.resolve(agent.definition.model)
        system = [{"role": "system", "content": agent.definition.instructions}]
        memory = agent.memory
        if memory is None:
            return Turn(agent, model, system + client_context, thread=None, resource_id=None)
        thread = await memory.open_thread(thread_id or new_id("mastra_thread_"), resource_id)
        await memory.record_turn(thread, incoming)
        history = [m for m in map(stored_to_model, await memory.window(thread.id)) if m]
        return Turn(agent, model, system + history, thread=thread, resource_id=resource_id,
                    user_message_id=incoming[-1].id)

    async def run(self, turn: Turn) -> AsyncIterator[TextDelta | Finish]:
        """The model's events; the reply is stored however the stream ends."""
        stream = self.llm.stream(ModelRequest(model=turn.model.mastra_id, messages=turn.context))
        pieces: list[str] = []
        turn.interrupted = True  # until the stream ends on its own
        try:
            async for event in stream:
                if isinstance(event, TextDelta):
                    pieces.append(event.text)
                else:
                    turn.finish = event
                yield event
            turn.interrupted = False
        except ModelProviderError as exc:
            turn.error, turn.interrupted = exc, False
            raise
        finally:
            turn.text = "".join(pieces)
            # Shielded: on a client disconnect this scope is already cancelled, and the
            # reply must still be closed out and saved.
            with anyio.CancelScope(shield=True):
                await stream.aclose()
                await self._save_reply(turn)

    async def _save_reply(self, turn: Turn) -> None:
        if turn.thread is None or turn.agent.memory is None:
            return
        if not turn.text and (turn.interrupted or turn.error):
            return  # nothing was generated; the user's message is already stored
        reply = assistant_message(turn.reply_id, turn.thread.id, turn.resource_id or turn.thread.resource_id,
                                  turn.text, now_iso(), turn.reply_metadata())
        await turn.agent.memory.save_reply(turn.thread, reply)
