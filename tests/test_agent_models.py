"""Models without code edits, and settings that change an agent only when they name it
(docs/configuration.md#models): ``DEV_SERVER_MODEL`` and ``DEV_SERVER_OM_MODEL`` fill in what
an agent's code leaves open, ``DEV_SERVER_AGENT_MODELS`` and ``DEV_SERVER_AGENT_OM_MODELS``
win over the code of the agents they name, and the other ``DEV_SERVER_OM_*`` settings apply
to the agents ``DEV_SERVER_OM_AGENTS`` names (chat-agent by default) and to no other."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import Any

import pytest

from dev_server import Agent, Memory
from dev_server.__main__ import model_lines
from dev_server.agents import chat_agent
from dev_server.agents.registry import DEFINITIONS, memory_options, with_models
from dev_server.factory import create_app, memory_settings
from dev_server.llm.scripted import ScriptedModel
from dev_server.settings import Settings, SettingsError
from tests.kit.chat import chat_turn
from tests.kit.servers import serve, settings_from_env
from tests.support import user_message

LONG = "I am planning a trip to Lisbon in May with my sister, and we love old trams, fado and pastries. " * 15


def agent_turn(server: Any, agent_id: str, message_id: str, text: str) -> dict[str, Any]:
    """One message to ``agent_id`` on its own thread; it must succeed."""
    thread = f"{agent_id}-trip"
    result = chat_turn(server, [user_message(f"{agent_id}-{message_id}", text)], chat_id=thread,
                       body={"conversationId": thread, "agentId": agent_id})
    assert result["ok"], result["error"]
    return result


def om_agent(agent_id: str, om: dict[str, Any] | bool = True, model: str | None = None) -> Agent:
    return Agent(id=agent_id, instructions="Help.", model=model,
                 memory=Memory(last_messages=10, observational_memory=om))


def options_of(settings: Settings, *agents: Agent) -> dict[str, Any]:
    """Each agent's memory options with ``settings`` applied, as the app builds them."""
    return memory_options(with_models(agents, settings.model, settings.agent_models), memory_settings(settings))


def test_the_default_model_fills_in_what_the_code_leaves_open_and_a_named_agent_takes_its_own() -> None:
    coded = Agent(id="coded", instructions="", model="openai/gpt-4.1")
    named = Agent(id="named", instructions="", model="openai/gpt-4.1")
    models = {d.id: d.model for d in with_models([*DEFINITIONS, coded, named], "anthropic/claude-haiku-4-5",
                                                 {"named": "ollama/llama3.2", "docs-agent": "groq/llama-3.1-8b"})}
    assert models == {"chat-agent": "anthropic/claude-haiku-4-5", "docs-agent": "groq/llama-3.1-8b",
                      "orchestrator-agent": "anthropic/claude-haiku-4-5", "coded": "openai/gpt-4.1",
                      "named": "ollama/llama3.2"}
    assert {d.id: d.model for d in with_models(DEFINITIONS)} == dict.fromkeys(
        ["chat-agent", "docs-agent", "orchestrator-agent"], "openai/gpt-4o-mini")  # as before the setting


def test_the_dev_banner_without_a_gateway_report_names_the_configured_models() -> None:
    mine = Agent(id="mine", instructions="", model="openai/gpt-4.1")
    assert model_lines({}, with_models([chat_agent.definition, mine], "anthropic/claude-haiku-4-5")) == [
        "chat-agent -> anthropic/claude-haiku-4-5", "mine -> openai/gpt-4.1"]


def test_a_user_with_only_an_anthropic_key_changes_no_code(tmp_path: Path) -> None:
    settings = settings_from_env(tmp_path, {"ANTHROPIC_API_KEY": "sk-ant-test",
                                            "DEV_SERVER_MODEL": "anthropic/claude-haiku-4-5"})
    services = create_app("gateway", settings).state.services
    assert services.llm.agent_models == dict.fromkeys(["chat-agent", "docs-agent", "orchestrator-agent"],
                                                      "anthropic/claude-haiku-4-5")
    chat = services.agents.get("chat-agent")
    assert chat.definition.model == "anthropic/claude-haiku-4-5"
    assert chat.memory.options.om.observer_choice.default  # the agent's own model observes without Gemini's key


def test_the_om_settings_change_only_the_agents_om_agents_names() -> None:
    mine = om_agent("mine", {"observation": {"messageTokens": 5000}})
    tuned = Settings(om_message_tokens=300, om_observation_tokens=900)
    found = options_of(tuned, chat_agent.definition, mine)
    assert found["chat-agent"].om.observation.message_tokens == 300  # named by default
    assert (found["mine"].om.observation.message_tokens, found["mine"].om.reflection.observation_tokens) == (
        5000, 40_000)  # its code wins
    found = options_of(tuned.model_copy(update={"om_agents": "mine"}), chat_agent.definition, mine)
    assert found["mine"].om.observation.message_tokens == 300 and found["mine"].om.reflection.observation_tokens == 900
    assert found["chat-agent"].om.observation.message_tokens == 30_000
    off = options_of(Settings(om_enabled=False), chat_agent.definition, mine)
    assert off["chat-agent"].om is None and off["mine"].om is not None


def test_the_default_om_model_fills_in_only_what_the_code_leaves_open() -> None:
    settings = Settings(om_model="groq/llama-3.1-8b")
    found = options_of(settings, om_agent("plain"), om_agent("both", {"model": "openai/gpt-4o-mini"}),
                       om_agent("observer", {"observation": {"model": "openai/gpt-4o-mini"}}))
    models = {agent_id: (o.om.observer_model, o.om.reflector_model) for agent_id, o in found.items()}
    assert models == {"plain": ("groq/llama-3.1-8b", "groq/llama-3.1-8b"),
                      "both": ("openai/gpt-4o-mini", "openai/gpt-4o-mini"),
                      "observer": ("openai/gpt-4o-mini", "groq/llama-3.1-8b")}
    assert found["plain"].describe()["observationalMemory"]["observationModel"] == "groq/llama-3.1-8b"


def test_a_named_agent_om_model_wins_over_its_code_for_observer_and_reflector() -> None:
    settings = Settings(om_model="groq/llama-3.1-8b", agent_om_models={"observer": "ollama/qwen3"})
    found = options_of(settings, om_agent("observer", {"observation": {"model": "openai/gpt-4o-mini"},
                                                       "reflection": {"model": "openai/gpt-4.1"}}))
    om = found["observer"].om
    assert (om.observer_model, om.reflector_model) == ("ollama/qwen3", "ollama/qwen3")
    assert om.observation.message_tokens == 30_000  # only the model changed


def test_settings_naming_no_agent_here_say_so(caplog: pytest.LogCaptureFixture) -> None:
    settings = Settings(agent_models={"ghost": "openai/gpt-4o"}, agent_om_models={"ghost": "openai/gpt-4o"},
                        om_message_tokens=300)
    with caplog.at_level(logging.WARNING, logger="dev_server.agents.registry"):
        options_of(settings, om_agent("mine"))
    messages = [record.getMessage() for record in caplog.records]
    assert "DEV_SERVER_AGENT_MODELS names 'ghost', which is not an agent here: ignored" in messages
    assert any(m.startswith("DEV_SERVER_AGENT_OM_MODELS names 'ghost'") for m in messages)
    assert any("DEV_SERVER_OM_AGENTS names (chat-agent), none of which is here: name yours (mine)" in m
               for m in messages)


@pytest.mark.parametrize(("name", "value", "message"), [
    ("DEV_SERVER_MODEL", "gpt-4o", "model id must look like 'provider/model'"),
    ("DEV_SERVER_OM_MODEL", "flash", "model id must look like 'provider/model'"),
    ("DEV_SERVER_AGENT_MODELS", "chat-agent=openai/gpt-4o", "Input should be a valid dictionary"),
    ("DEV_SERVER_AGENT_MODELS", '{"chat-agent": "gpt-4o"}', "'chat-agent': model id must look like"),
    ("DEV_SERVER_AGENT_OM_MODELS", '{"chat-agent": 3}', "Input should be a valid string"),
])
def test_a_bad_model_setting_is_one_line_naming_it(monkeypatch: pytest.MonkeyPatch, name: str, value: str,
                                                   message: str) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(SettingsError) as raised:
        Settings.load()
    assert str(raised.value).startswith(f"invalid setting {name}=") and message in str(raised.value)
    assert "\n" not in str(raised.value)


def test_a_turn_and_its_observer_use_the_models_the_settings_give(tmp_path: Path) -> None:
    """Through a gateway: chat-agent's step on DEV_SERVER_MODEL's model; its observer on
    DEV_SERVER_OM_MODEL's; an agent that names its OM model in code keeps it until
    DEV_SERVER_AGENT_OM_MODELS names the agent."""
    low = {"observation": {"messageTokens": 300, "bufferTokens": False}}
    chat = dataclasses.replace(chat_agent.definition, memory=Memory(last_messages=10, observational_memory=low))
    pinned = om_agent("pinned", {**low, "model": "openai/gpt-4.1"}, model="openai/gpt-4.1")
    renamed = om_agent("renamed", {**low, "model": "openai/gpt-4.1"})
    llm = ScriptedModel(local=False)
    settings = {"telemetry": False, "model": "anthropic/claude-haiku-4-5", "om_model": "groq/llama-3.1-8b",
                "agent_om_models": {"renamed": "ollama/qwen3"}}
    with serve("gateway", tmp_path, inprocess=True, settings=settings, agents=(chat, pinned, renamed),
               llm=llm) as gateway:
        for agent_id in ("chat-agent", "pinned", "renamed"):
            first = agent_turn(gateway, agent_id, "1", LONG)
            assert first["chunks"][0]["messageMetadata"]["model"] == {
                "pinned": "openai/gpt-4.1"}.get(agent_id, "anthropic/claude-haiku-4-5")
            agent_turn(gateway, agent_id, "2", "And what should we eat?")
    observers = [request.model.mastra_id for request in llm.requests_for("observer")]
    assert observers == ["groq/llama-3.1-8b", "openai/gpt-4.1", "ollama/qwen3"]
