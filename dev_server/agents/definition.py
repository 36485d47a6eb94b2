from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from dev_server.kernel.tools import Tool
from dev_server.memory.options import MemoryOptions

DEFAULT_RESOURCE = "ai-chat"


@dataclass(frozen=True)
class AgentDefinition:
    """What an agent is: who it is, what model answers, and whether it remembers.

    ``memory`` is a factory of the agent's memory options, called once per process when the
    agent is registered (its ``Memory`` is built from them: ``dev_server.agents.registry``);
    an agent without one has no memory at all: nothing is stored and no thread is created.
    ``tools`` are offered to the model every step; a turn runs at most ``max_steps`` model
    calls (a step whose model calls tools is followed by one that sees their results).
    """

    id: str
    name: str
    instructions: str
    model: str  # Mastra form "provider/model"
    description: str = ""
    memory: Callable[[], MemoryOptions] | None = None
    resource: str = DEFAULT_RESOURCE
    tools: tuple[Tool, ...] = ()
    max_steps: int = 5
