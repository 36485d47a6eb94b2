"""Agent definitions and the registry: memory factories are called once, at registration."""

from __future__ import annotations

import pytest

from dev_server.agents.definition import AgentDefinition
from dev_server.agents.registry import DEFINITIONS, AgentRegistry
from dev_server.factory import create_app
from dev_server.memory.memory import MemoryOptions
from dev_server.settings import Settings


def test_each_memory_factory_runs_once_per_app(settings: Settings):
    calls = []

    def factory() -> MemoryOptions:
        calls.append(1)
        return MemoryOptions(last_messages=3)

    counted = AgentDefinition(id="counted", name="Counted", instructions="", model="local/echo", memory=factory)
    app = create_app("gateway", settings, agents=[*DEFINITIONS, counted])
    assert calls == [1]
    agent = app.state.services.agents.get("counted")
    assert agent.memory.options.last_messages == 3 and agent.memory.store is app.state.services.conversations


def test_agents_without_memory_get_no_memory_wiring(settings: Settings):
    app = create_app("gateway", settings)
    assert app.state.services.agents.get("orchestrator-agent").memory is None
    assert {a.id for a in app.state.services.agents if a.memory} == {"chat-agent", "docs-agent"}


def test_duplicate_agent_ids_are_refused(settings: Settings):
    twice = AgentDefinition(id="chat-agent", name="Again", instructions="", model="local/echo")
    with pytest.raises(ValueError, match="registered twice"):
        AgentRegistry([*DEFINITIONS, twice], create_app("gateway", settings).state.services.conversations)


def test_the_window_is_last_messages_before_the_input_plus_the_input():
    assert MemoryOptions(last_messages=10).window(1) == 11
    assert MemoryOptions(last_messages=10).window(0) == 11  # re-submit: the anchor is the input
    assert MemoryOptions(last_messages=False).window(3) == 3
