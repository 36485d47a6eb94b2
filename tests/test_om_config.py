"""Observational Memory's options: Mastra's defaults, resolution and checks
(docs/observational-memory.md#thresholds), and the ``DEV_SERVER_OM_*`` settings."""

from __future__ import annotations

from typing import Any

import pytest

from dev_server.memory.memory import Memory, MemoryOptions
from dev_server.memory.overrides import with_observational_memory
from dev_server.om.options.activation import Triggers
from dev_server.om.options.config import (
    DEFAULT_MODEL,
    ObservationalMemoryOptions,
    describe_om,
    observational_memory_options,
)
from dev_server.settings import Settings, SettingsError
from dev_server.storage.conversations import ConversationStore


def test_true_gives_mastras_defaults() -> None:
    om = observational_memory_options(True)
    assert isinstance(om, ObservationalMemoryOptions)
    assert (om.scope, om.observation.message_tokens, om.reflection.observation_tokens) == ("thread", 30000, 40000)
    assert om.observation.buffer_tokens == 6000 and om.observation.buffer_activation == 0.8
    assert om.observation.block_after == 36000 and om.reflection.block_after == 48000
    assert om.observation.max_tokens_per_batch == 10000 and om.observation.previous_observer_tokens == 2000
    # Mastra's temperatures and thinking budgets belong to the models Mastra gives them (applied per call)
    assert om.observation.model_settings == {} and om.reflection.model_settings == {}
    assert om.observation.provider_options == {"google": {"thinking": {"type": "enabled", "budget_tokens": 215}}}
    assert om.reflection.provider_options == {"google": {"thinking": {"type": "enabled", "budget_tokens": 1024}}}
    assert om.retention_floor() == 6000 and om.message_threshold() == 30000
    assert observational_memory_options(False) is None and observational_memory_options({"enabled": False}) is None


def test_buffering_values_resolve_to_tokens() -> None:
    om = observational_memory_options({"observation": {"messageTokens": 1000, "bufferTokens": 0.5,
                                                       "bufferActivation": 0.5, "blockAfter": 2}})
    assert (om.observation.buffer_tokens, om.observation.block_after) == (500, 2000)
    assert om.retention_floor() == 500
    off = observational_memory_options({"observation": {"bufferTokens": False}})
    assert off.observation.buffer_tokens is False and off.retention_floor() == 0 and off.observation.block_after is None
    assert observational_memory_options({"observation": {"bufferTokens": 7000}}).observation.buffer_tokens == 7000
    # resource scope: buffering is off by default
    assert observational_memory_options({"scope": "resource"}).async_buffering is False


def test_model_default_and_exclusivity() -> None:
    assert observational_memory_options({"model": "default"}).observer_model == DEFAULT_MODEL
    om = observational_memory_options({"observation": {"model": "openai/gpt-4o-mini"}})
    assert (om.observer_model, om.reflector_model) == ("openai/gpt-4o-mini", None)
    with pytest.raises(ValueError, match=r"observationalMemory\.model cannot be combined"):
        observational_memory_options({"model": "openai/gpt-4o", "reflection": {"model": "openai/gpt-4o-mini"}})


@pytest.mark.parametrize(("value", "field"), [
    ({"scope": "everywhere"}, "observationalMemory.scope"),
    ({"observation": {"messageTokens": 0}}, "observationalMemory.observation.messageTokens"),
    ({"observation": {"messageTokens": "many"}}, "observationalMemory.observation.messageTokens"),
    ({"reflection": {"observationTokens": -5}}, "observationalMemory.reflection.observationTokens"),
    ({"observation": {"bufferTokens": 40000}}, "observationalMemory.observation.bufferTokens"),
    ({"observation": {"bufferTokens": "half"}}, "observationalMemory.observation.bufferTokens"),
    ({"observation": {"bufferActivation": 50}}, "observationalMemory.observation.bufferActivation"),
    ({"observation": {"blockAfter": 0.5}}, "observationalMemory.observation.blockAfter"),
    ({"observation": {"blockAfter": 200}}, "observationalMemory.observation.blockAfter"),
    ({"scope": "resource", "observation": {"bufferTokens": 0.2}}, "observationalMemory.observation.bufferTokens"),
    ({"shareTokenBudget": True, "observation": {"bufferTokens": 0.2}}, "observationalMemory.shareTokenBudget"),
    ({"observation": {"messageTokenz": 5}}, "observationalMemory.observation.messageTokenz"),
    ({"model": ""}, "observationalMemory.model"),
    ({"enabled": "yes"}, "observationalMemory.enabled"),
    ({"shareTokenBudget": True}, "observationalMemory.shareTokenBudget"),
    ({"activateAfterIdle": "soon"}, "observationalMemory.activateAfterIdle"),
    ({"activateAfterIdle": -1}, "observationalMemory.activateAfterIdle"),
    ({"activateAfterIdle": "5 fortnights"}, "observationalMemory.activateAfterIdle"),
    ({"activateOnProviderChange": "yes"}, "observationalMemory.activateOnProviderChange"),
    ({"reflection": {"activateAfterIdle": "later"}}, "observationalMemory.reflection.activateAfterIdle"),
    ({"reflection": {"activateOnProviderChange": 1}}, "observationalMemory.reflection.activateOnProviderChange"),
    ({"reflection": {"bufferActivation": 7}}, "observationalMemory.reflection.bufferActivation"),
    ({"reflection": {"blockAfter": 0.9}}, "observationalMemory.reflection.blockAfter"),
    ({"bufferOnIdle": "yes"}, "observationalMemory.bufferOnIdle"),
    ({"observation": {"bufferOnIdle": 1}}, "observationalMemory.observation.bufferOnIdle"),
    ({"temporalMarkers": "on"}, "observationalMemory.temporalMarkers"),
    ({"observation": {"bufferActivation": 40000}}, "observationalMemory.observation.bufferActivation"),
])
def test_invalid_values_fail_at_construction_naming_the_field(value: dict[str, Any], field: str) -> None:
    with pytest.raises(ValueError, match=field.replace(".", r"\.")):
        MemoryOptions(observational_memory=value)


def test_idle_and_provider_options_resolve() -> None:
    om = observational_memory_options({"activateAfterIdle": "5m", "activateOnProviderChange": True,
                                       "temporalMarkers": True, "observation": {"bufferOnIdle": True},
                                       "reflection": {"activateAfterIdle": "1hr"}})
    assert (om.triggers, om.buffer_on_idle, om.temporal_markers) == (Triggers(300_000, True), True, True)
    assert om.reflection.triggers == Triggers(3_600_000, False)
    for value, expected in [(90_000, 90_000), ("90s", 90_000), ("1.5h", 5_400_000), ("250ms", 250),
                            ("2 days", 172_800_000), ("auto", "auto"), (False, None), (None, None), (0, 0)]:
        assert observational_memory_options({"activateAfterIdle": value}).triggers.after_idle == expected
    # reflections do not inherit the top-level setting: they opt in
    assert observational_memory_options({"activateAfterIdle": "5m"}).reflection.triggers.after_idle is None
    assert observational_memory_options(True).reflection.activation_point == 20000


def test_shared_budget_moves_the_threshold_with_the_observations() -> None:
    om = observational_memory_options({"shareTokenBudget": True, "observation": {"bufferTokens": False}})
    assert om.message_threshold(0) == 70000 and om.message_threshold(30000) == 40000
    assert om.message_threshold(60000) == 30000


def test_memory_describes_and_turns_om_on_and_off() -> None:
    memory = Memory(MemoryOptions(observational_memory={"observation": {"messageTokens": 300}}),
                    ConversationStore(None))
    described = memory.options.describe()["observationalMemory"]
    assert described["enabled"] is True and described["messageTokens"] == 300
    assert Memory(MemoryOptions(), ConversationStore(None)).options.describe()["observationalMemory"] == {
        "enabled": False}
    memory = Memory(with_observational_memory(memory.options, None), ConversationStore(None))
    assert memory.options.om is None and describe_om(None) == {"enabled": False}


def test_settings_make_the_options_and_name_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEV_SERVER_OM_MESSAGE_TOKENS", "300")
    monkeypatch.setenv("DEV_SERVER_OM_OBSERVATION_TOKENS", "400")
    monkeypatch.setenv("DEV_SERVER_OM_BUFFER_TOKENS", "false")
    monkeypatch.setenv("DEV_SERVER_OM_MODEL", "default")
    settings = Settings.load()
    # the model is a default for every agent's OM, apart from the options of DEV_SERVER_OM_AGENTS
    assert settings.observational_memory == {"observation": {"messageTokens": 300, "bufferTokens": False},
                                             "reflection": {"observationTokens": 400}}
    assert settings.om_model == "default"
    om = observational_memory_options(settings.observational_memory)
    assert (om.observation.message_tokens, om.reflection.observation_tokens, om.async_buffering) == (300, 400, False)
    monkeypatch.setenv("DEV_SERVER_OM_BUFFER_TOKENS", "0.5")
    assert Settings.load().observational_memory["observation"]["bufferTokens"] == 0.5
    monkeypatch.setenv("DEV_SERVER_OM_BUFFER_TOKENS", "100")
    assert Settings.load().observational_memory["observation"]["bufferTokens"] == 100
    monkeypatch.setenv("DEV_SERVER_OM_BUFFER_TOKENS", "300")
    with pytest.raises(SettingsError,
                       match=r"^invalid setting: DEV_SERVER_OM_\*: .*bufferTokens \(300\) must be below"):
        Settings.load()
    monkeypatch.setenv("DEV_SERVER_OM_BUFFER_TOKENS", "lots")
    with pytest.raises(SettingsError, match="om_buffer_tokens|OM_BUFFER_TOKENS"):
        Settings.load()
    monkeypatch.delenv("DEV_SERVER_OM_BUFFER_TOKENS")
    monkeypatch.setenv("DEV_SERVER_OM_ENABLED", "false")
    assert Settings.load().observational_memory is False


def test_previous_observations_are_cut_to_the_budget_only_behind_the_flag() -> None:
    from dev_server.om.prompting.observer_context import truncate_previous_observations
    from dev_server.om.tokens.counting import estimate_tokens

    assert observational_memory_options(True).observation.truncate_previous_observations is False
    assert observational_memory_options({"observation": {"truncatePreviousObservations": True}}) \
        .observation.truncate_previous_observations is True
    with pytest.raises(ValueError, match="truncatePreviousObservations"):
        observational_memory_options({"observation": {"truncatePreviousObservations": "yes"}})
    days = []
    for day in range(1, 11):
        days.append(f"Date: Jan {day}, 2026")
        days += [f"* 🔴 (09:00) User stated fact number {day} about their garden",
                 f"* 🟡 (09:05) Assistant listed {day} watering schedules with many details each",
                 f"* 🟢 (09:10) Small talk about the weather on day {day}"]
    log = "\n".join(days)
    cut = truncate_previous_observations(log, 200)
    assert estimate_tokens(cut) <= 300 < estimate_tokens(log)  # the budget, plus headers and markers
    assert "Small talk about the weather on day 10" in cut  # the raw tail stays whole
    assert "fact number 4 " in cut and "weather on day 4\n" not in cut  # an old user fact, not old small talk
    assert "observations truncated here]" in cut
    assert all(line.startswith(("Date:", "*", "[")) for line in cut.split("\n"))
    assert truncate_previous_observations(log, 100_000) == log


def test_om_options_setting_merges_any_option(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEV_SERVER_OM_MESSAGE_TOKENS", "600")
    monkeypatch.setenv("DEV_SERVER_OM_OPTIONS", '{"activateAfterIdle": "5m", "temporalMarkers": true,'
                                                ' "observation": {"bufferTokens": 200}}')
    options = Settings.load().observational_memory
    assert options["observation"] == {"messageTokens": 600, "bufferTokens": 200}
    om = observational_memory_options(options)
    assert (om.triggers.after_idle, om.temporal_markers, om.observation.buffer_tokens) == (300_000, True, 200)
    monkeypatch.setenv("DEV_SERVER_OM_OPTIONS", '{"activateAfterIdle": "whenever"}')
    with pytest.raises(SettingsError, match=r"DEV_SERVER_OM_\*: .*activateAfterIdle"):
        Settings.load()


def test_settings_merge_over_the_agents_own_options_and_keep_what_only_code_gives() -> None:
    def on_end(event: dict) -> None:
        pass

    extractor = {"name": "Mood", "instructions": "The user's mood.", "onExtracted": lambda ctx: ctx.current.upper()}
    memory = Memory(MemoryOptions(observational_memory={
        "hooks": {"onObservationEnd": on_end},
        "observation": {"messageTokens": 500, "extract": [extractor]}}), ConversationStore(None))
    memory = Memory(with_observational_memory(memory.options, {"observation": {"threadTitle": True},
                                                               "reflection": {"observationTokens": 900}}),
                    ConversationStore(None))
    om = memory.options.om
    assert om.observation.thread_title and om.observation.message_tokens == 500
    assert [e.name for e in om.observation.extract] == ["Mood"] and om.reflection.observation_tokens == 900
    assert om.hooks.callbacks["onObservationEnd"] is on_end


def test_settings_that_turn_om_off_turn_it_off() -> None:
    memory = Memory(MemoryOptions(observational_memory=True), ConversationStore(None))
    memory = Memory(with_observational_memory(memory.options, Settings(om_enabled=False).observational_memory),
                    ConversationStore(None))
    assert memory.options.om is None
