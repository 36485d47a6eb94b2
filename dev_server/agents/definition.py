"""What an agent is: the public ``dev_server.Agent`` (README.md, "Your own agent").

A definition is checked when it is made, so a mistake in a user's agents file is one line
at start (``dev_server.agents.loading``), not a failed turn: an id that fits a URL path,
a model id of the form ``provider/model``, tools that are ``Tool``s with distinct names,
memory options (or a factory of them), at least one step.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from dev_server.kernel.tools import Tool
from dev_server.llm.models import split_model_id
from dev_server.memory.options import MemoryOptions

DEFAULT_RESOURCE = "ai-chat"
# An agent id is a path segment (/api/agents/{id}) and a key of the settings that name agents.
AGENT_ID = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")


@dataclass(frozen=True, kw_only=True)
class AgentDefinition:
    """Who an agent is, what model answers, what it can do, and whether it remembers.

    ``model``: Mastra's ``provider/model`` form; None takes the process's default model
    (``DEV_SERVER_MODEL``, default ``openai/gpt-4o-mini``), and ``DEV_SERVER_AGENT_MODELS``
    can name this agent to replace it (``dev_server.agents.registry.with_models``).
    ``memory``: the agent's ``MemoryOptions`` (``dev_server.Memory``), or a factory of them
    called once per process when the agent is registered (its ``Memory`` is built from them:
    ``dev_server.agents.registry``); an agent without one has no memory at all: nothing is
    stored and no thread is created. ``tools`` are offered to the model every step; a turn
    runs at most ``max_steps`` model calls (a step whose model calls tools is followed by one
    that sees their results). ``name`` defaults to the id.
    """

    id: str
    instructions: str
    name: str = ""
    model: str | None = None
    description: str = ""
    memory: MemoryOptions | Callable[[], MemoryOptions] | None = None
    resource: str = DEFAULT_RESOURCE
    tools: Sequence[Tool] = ()
    max_steps: int = 5

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not AGENT_ID.match(self.id):
            raise ValueError(f"agent id {self.id!r} must be 1-128 letters, digits, '_', '-' or '.' "
                             "(it is part of a URL), not starting with '-' or '.'")
        where = f"agent {self.id!r}"
        for field_name in ("instructions", "name", "description", "resource"):
            value = getattr(self, field_name)
            if not isinstance(value, str):
                raise TypeError(f"{where}: {field_name} must be a string, not {type(value).__name__}")
        if not self.name:
            object.__setattr__(self, "name", self.id)
        if self.model is not None:
            if not isinstance(self.model, str):
                raise TypeError(f"{where}: model must be a string like 'openai/gpt-4o-mini', not "
                                f"{type(self.model).__name__}")
            try:
                split_model_id(self.model)
            except ValueError as exc:
                raise ValueError(f"{where}: {exc}") from None
        if self.memory is not None and not isinstance(self.memory, MemoryOptions) and not callable(self.memory):
            raise TypeError(f"{where}: memory must be a dev_server.Memory(...), not {type(self.memory).__name__}")
        if isinstance(self.tools, (str, bytes)) or not isinstance(self.tools, Sequence):
            raise TypeError(f"{where}: tools must be a list of tools, not {type(self.tools).__name__}")
        tools = tuple(self.tools)
        names: set[str] = set()
        for index, tool in enumerate(tools):
            if not isinstance(tool, Tool):
                hint = ": decorate it with @dev_server.tool" if callable(tool) else ""
                raise TypeError(f"{where}: tools[{index}] is a {type(tool).__name__}, not a Tool{hint}")
            if tool.name in names:
                raise ValueError(f"{where}: two tools are named {tool.name!r}")
            names.add(tool.name)
        object.__setattr__(self, "tools", tools)
        if isinstance(self.max_steps, bool) or not isinstance(self.max_steps, int) or self.max_steps < 1:
            raise ValueError(f"{where}: max_steps must be a positive integer, not {self.max_steps!r}")

    def memory_options(self) -> MemoryOptions | None:
        """The agent's memory options (its factory called), or None without memory."""
        return self.memory() if callable(self.memory) else self.memory
