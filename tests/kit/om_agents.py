"""Agents and memories built for Observational Memory tests: extractors of every kind (an
``onExtracted``, a Pydantic schema, a raising one, one that never sees its previous value), and
an engine on seeded threads."""

from __future__ import annotations

import dataclasses
from typing import Any

from pydantic import BaseModel

from dev_server.agents import chat_agent
from dev_server.agents.definition import AgentDefinition
from dev_server.kernel.messages import Message
from dev_server.kernel.model import LLMClient
from dev_server.llm.scripted import ScriptedModel
from dev_server.memory.memory import Memory, MemoryOptions
from dev_server.memory.working_document import WorkingMemoryOptions
from dev_server.om.engine.cycle_context import CycleContext
from dev_server.om.options.extractors import ExtractedContext
from dev_server.storage.conversations import ConversationStore
from dev_server.storage.libsql import LibSQLStore
from tests.kit.builders import seed_threads


class Profile(BaseModel):
    name: str
    statements: int


class Summary(BaseModel):
    summary: str


def checked(context: ExtractedContext) -> str:
    return f"{context.current} [checked]"


def broken(context: ExtractedContext) -> Any:
    raise RuntimeError("onExtracted refused it")


EXTRACTORS = [
    {"name": "Topics", "instructions": "What the user talks about.", "onExtracted": checked},
    {"name": "Profile", "instructions": "Who the user is.", "schema": Profile},
    {"name": "Broken", "instructions": "Anything.", "onExtracted": broken},
    {"name": "Fresh", "instructions": "What the last message was about.", "includePreviousExtraction": False},
]
# observe at 300 tokens with every extractor, a title and the working memory; never reflect
EXTRACTING = {"observation": {"messageTokens": 300, "bufferTokens": False, "threadTitle": True,
                              "manageWorkingMemory": True, "extract": EXTRACTORS},
              "reflection": {"observationTokens": 100_000}}


def extracting_agent(options: dict[str, Any] = EXTRACTING) -> AgentDefinition:
    """chat-agent with OM of ``options`` and thread-scoped working memory."""
    return dataclasses.replace(chat_agent.definition, memory=lambda: MemoryOptions(
        last_messages=10, working_memory=WorkingMemoryOptions(scope="thread"), observational_memory=options))


async def om_setup(db: LibSQLStore, messages: list[Message], options: dict[str, Any],
                   llm: LLMClient | None = None, agent_id: str | None = None) -> tuple[Memory, Any, CycleContext]:
    """``messages`` stored (their threads titled "About <id>", of ``agent_id``), a memory
    with OM ``options`` on them, its engine, and a cycle context on thread ``t`` with ``llm``
    (default: a ``ScriptedModel`` with nothing scripted: the local model answers,
    ``ctx.llm.requests`` holds every request)."""
    conversations = ConversationStore(db)
    await seed_threads(conversations, messages, agent_id=agent_id)
    memory = Memory(MemoryOptions(observational_memory=options), conversations)
    engine = memory.observational_memory()
    llm = llm or ScriptedModel()
    ctx = CycleContext(llm, await llm.resolve("openai/gpt-4o-mini"), "t", None, lambda part, durable=False: None)
    return memory, engine, ctx
