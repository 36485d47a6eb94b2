"""Mastra's Observational Memory options under Mastra's names and places (issue 28, items 10
and 15): a configuration written from Mastra's OM reference starts here and resolves to what
it means there; options of Mastra's that are not supported fail with their reason; our old
names fail with a pointer to Mastra's. The behaviour the options change is tested in
``tests/test_om_option_behaviour.py``."""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

import pytest

from dev_server.memory.memory import Memory, MemoryOptions
from dev_server.om.options.activation import NO_TRIGGERS, Triggers
from dev_server.om.options.attachments import DEFAULT_OBSERVE_ATTACHMENTS, accepts, for_model
from dev_server.om.options.config import observational_memory_options
from dev_server.om.options.extractors import Extractor
from dev_server.om.options.models import ModelByInputTokens
from dev_server.om.processor import BufferOnIdle
from dev_server.settings import Settings
from dev_server.storage.conversations import ConversationStore
from tests.kit.om_agents import Profile


def on_extracted(context: Any) -> Any:
    return None


# Every option of Mastra's OM reference that is supported, each in Mastra's place.
FROM_MASTRAS_REFERENCE: dict[str, Any] = {
    "enabled": True,
    "scope": "thread",
    "activateAfterIdle": "5m",
    "activateOnProviderChange": True,
    "shareTokenBudget": False,
    "temporalMarkers": True,
    "retrieval": {"vector": False, "scope": "thread", "instructions": "Prefer the newest thread."},
    "hooks": {"onObservationEnd": lambda event: None, "onReflectionEnd": lambda event: None},
    "hookExecution": "non-blocking",
    "observation": {
        "model": ModelByInputTokens({8000: "openai/gpt-4o-mini", 100000: "google/gemini-2.5-pro"}),
        "instruction": "Track pets.",
        "threadTitle": True,
        "extract": [{"name": "User profile", "instructions": lambda context: f"Who the user is ({context.source}).",
                     "schema": Profile, "includePreviousExtraction": False, "metadataKeyPath": "profile.user",
                     "onExtracted": on_extracted},
                    Extractor(name="Mood", instructions="The user's mood.", metadata_key_path=False)],
        "manageWorkingMemory": False,
        "observeAttachments": ["image/*", "application/pdf", "text/csv"],
        "messageTokens": 20_000,
        "maxTokensPerBatch": 8_000,
        "modelSettings": {"temperature": 0.2, "maxOutputTokens": 4_000},
        "providerOptions": {"google": {"thinkingConfig": {"thinkingBudget": 215}}},
        "bufferTokens": 0.25,
        "bufferOnIdle": True,
        "bufferActivation": 0.7,
        "activateAfterIdle": "1hr",
        "activateOnProviderChange": False,
        "blockAfter": 1.5,
        "previousObserverTokens": 0,
    },
    "reflection": {
        "model": [{"model": "openai/gpt-4o-mini", "maxRetries": 2}, {"model": "default"}],
        "instruction": "Group health notes.",
        "extract": [{"name": "Summary", "instructions": "What the log is about."}],
        "observationTokens": 60_000,
        "modelSettings": {"temperature": 0},
        "providerOptions": {"google": {"thinkingConfig": {"thinkingBudget": 1024}}},
        "bufferActivation": 0.5,
        "activateAfterIdle": 300_000,
        "activateOnProviderChange": True,
        "blockAfter": 1.2,
    },
}


def test_a_configuration_from_mastras_reference_starts_and_means_the_same() -> None:
    om = MemoryOptions(observational_memory=FROM_MASTRAS_REFERENCE).om
    assert om is not None and om.standalone is False
    observation, reflection = om.observation, om.reflection
    assert (observation.message_tokens, observation.buffer_tokens, observation.block_after) == (20_000, 5_000, 30_000)
    assert (observation.buffer_activation, observation.max_tokens_per_batch) == (0.7, 8_000)
    assert observation.observe_attachments == ("image/*", "application/pdf", "text/csv")
    assert om.buffer_on_idle is True and observation.previous_observer_tokens == 0
    assert observation.model_settings == {"temperature": 0.2, "maxOutputTokens": 4_000}
    assert [e.slug for e in observation.extract] == ["user-profile", "mood"]
    profile, mood = observation.extract
    assert profile.metadata_key_path == "profile.user" and profile.on_extracted is on_extracted
    assert profile.schema["type"] == "object" and callable(profile.instructions) and profile.dynamic
    assert mood.metadata_key_path is False and mood.metadata_key == "" and not mood.dynamic
    assert (reflection.observation_tokens, reflection.block_after, reflection.activation_point) == (60_000, 72_000,
                                                                                                    30_000)
    assert [c.max_retries for c in om.reflector_choice.candidates] == [2, None]
    assert om.retrieval is not None and om.retrieval.scope == "thread"
    # through an agent's memory (Mastra's new Memory(...)): the top-level triggers, observations only
    assert om.observation_triggers == Triggers(300_000, True) and om.reflection_triggers == NO_TRIGGERS
    # on the standalone class: observation.* over the top level, and reflection.*
    standalone = dataclasses.replace(om, standalone=True)
    assert standalone.observation_triggers == Triggers(3_600_000, False)
    assert standalone.reflection_triggers == Triggers(300_000, True)


def test_the_settings_take_mastras_options_as_json(monkeypatch: pytest.MonkeyPatch) -> None:
    """``DEV_SERVER_OM_OPTIONS`` is JSON: every option but the functions (hooks, an extractor's
    functions), which only an agent's Python definition can give."""
    as_json = {key: value for key, value in FROM_MASTRAS_REFERENCE.items() if key != "hooks"}
    as_json["observation"] = {**as_json["observation"], "model": {"upTo": {"8000": "openai/gpt-4o-mini"}},
                              "extract": [{"name": "Mood", "instructions": "The user's mood.",
                                           "metadataKeyPath": False}]}
    monkeypatch.setenv("DEV_SERVER_OM_OPTIONS", json.dumps(as_json))
    om = observational_memory_options(Settings.load().observational_memory)
    assert om.observation.extract[0].metadata_key_path is False and om.buffer_on_idle
    assert om.observation.observe_attachments == ("image/*", "application/pdf", "text/csv")


def test_buffer_on_idle_is_read_under_observation_and_the_top_level_key_is_its_fallback() -> None:
    def buffer_on_idle(options: dict[str, Any]) -> bool:
        memory = Memory(MemoryOptions(observational_memory=options), ConversationStore(None))
        on = any(isinstance(p, BufferOnIdle) for p in memory.processors)
        assert on == memory.options.om.buffer_on_idle
        return on

    assert buffer_on_idle({"observation": {"bufferOnIdle": True}})  # Mastra's place
    assert buffer_on_idle({"bufferOnIdle": True})  # ours: read as observation.bufferOnIdle
    assert not buffer_on_idle({"bufferOnIdle": True, "observation": {"bufferOnIdle": False}})  # the place wins
    assert not buffer_on_idle({})
    # without async buffering it starts and does nothing, as in Mastra
    assert not buffer_on_idle({"observation": {"bufferOnIdle": True, "bufferTokens": False}})
    assert not buffer_on_idle({"scope": "resource", "observation": {"bufferOnIdle": True}})


@pytest.mark.parametrize(("value", "expected"), [
    (None, DEFAULT_OBSERVE_ATTACHMENTS), (True, True), (False, False), ("auto", "auto"), ([], ()),
    (["IMAGE/*", "application/pdf"], ("IMAGE/*", "application/pdf")), (("*",), ("*",)),
])
def test_observe_attachments_takes_mastras_values(value: Any, expected: Any) -> None:
    given = {} if value is None else {"observeAttachments": value}
    assert observational_memory_options({"observation": given}).observation.observe_attachments == expected


def test_observe_attachments_matches_media_types_as_mastra_does() -> None:
    assert accepts(("IMAGE/*",), "image/PNG", image=True) and not accepts(("image/*",), "application/pdf", image=False)
    assert accepts(("*",), "text/csv", image=False) and accepts(("*/*",), "", image=False)
    assert accepts(("image/*",), "", image=True)  # an image without a media type is image/*
    assert not accepts(("image/png",), "", image=True)  # ... which an exact type does not match
    assert accepts(("application/octet-stream",), "", image=False) and not accepts((), "image/png", image=True)
    assert accepts((" application/pdf ",), "application/pdf", image=False) and not accepts(("",), "x/y", image=False)
    assert accepts(True, "x/y", image=False) and not accepts(False, "image/png", image=True)


def test_auto_sends_attachments_by_the_observer_models_capabilities() -> None:
    import litellm

    from dev_server.llm.models import ModelResolver

    resolver = ModelResolver(litellm, {"OPENAI_API_KEY": "sk-test", "DEEPSEEK_API_KEY": "test"}, fallback=False)
    vision, text_only = resolver.plan("openai/gpt-4o-mini"), resolver.plan("deepseek/deepseek-chat")
    unknown = resolver.plan("openai/no-such-model-anywhere")
    assert (vision.capabilities_known, vision.vision) == (True, True)
    assert (text_only.capabilities_known, text_only.vision, text_only.pdf_input) == (True, False, False)
    assert unknown.capabilities_known is False
    assert (for_model("auto", vision), for_model("auto", text_only), for_model("auto", unknown)) == (True, False, True)
    assert for_model("auto", None) is True and for_model(("image/*",), text_only) == ("image/*",)


def test_previous_observer_tokens_and_idle_take_zero_as_mastra_does() -> None:
    om = observational_memory_options({"activateAfterIdle": 0, "observation": {"previousObserverTokens": 0}})
    assert om.triggers.after_idle == 0 and om.observation.previous_observer_tokens == 0
    assert observational_memory_options({"observation": {"previousObserverTokens": False}}) \
        .observation.previous_observer_tokens is False


def test_observation_false_turns_the_inherited_trigger_off_on_the_standalone_class() -> None:
    om = observational_memory_options({"activateAfterIdle": "5m", "activateOnProviderChange": True,
                                       "observation": {"activateAfterIdle": False}})
    standalone = dataclasses.replace(om, standalone=True)
    assert standalone.observation_triggers == Triggers(None, True)  # the provider change is still inherited
    assert standalone.reflection_triggers == NO_TRIGGERS  # reflections never inherit
    assert om.observation_triggers == Triggers(300_000, True)  # an agent's memory reads the top level
    assert standalone.snapshot()["activateAfterIdle"] is None and om.snapshot()["activateAfterIdle"] == 300_000


@pytest.mark.parametrize(("options", "field", "reason"), [
    ({"observation": {"continuationHints": False}}, "observation.continuationHints", "not supported here"),
    ({"reflection": {"continuationHints": {"suggestedResponse": False}}}, "reflection.continuationHints",
     "not supported here"),
    ({"hookExecution": "await"}, "hookExecution", "'await' is not supported"),
    ({"hooks": {"beforeObservation": lambda given: None}}, "hooks.beforeObservation", "not supported here"),
    ({"hooks": {"afterReflection": lambda given: None}}, "hooks.afterReflection", "not supported here"),
    ({"experimental_subconscious": {}}, "experimental_subconscious", "not supported here"),
    ({"onIndexObservations": lambda observation: None}, "onIndexObservations", "not supported here"),
    ({"onDebugEvent": print}, "onDebugEvent", "only by the standalone ObservationalMemory"),
    ({"storage": object()}, "storage", "store argument"),
    ({"observation": {"observeAttachments": "images"}}, "observation.observeAttachments", "must be 'auto'"),
    ({"observation": {"observeAttachments": ["image/*", 3]}}, "observation.observeAttachments", "must be 'auto'"),
    ({"observation": {"activateAfterIdle": "soon"}}, "observation.activateAfterIdle", "must be milliseconds"),
    ({"observation": {"activateOnProviderChange": "yes"}}, "observation.activateOnProviderChange", "true or false"),
    ({"observation": {"previousObserverTokens": -1}}, "observation.previousObserverTokens", "positive integer"),
])
def test_options_of_mastras_that_are_not_supported_fail_with_their_reason(options: dict[str, Any], field: str,
                                                                          reason: str) -> None:
    with pytest.raises(ValueError, match=re.escape(f"observationalMemory.{field} ") + ".*" + re.escape(reason)):
        MemoryOptions(observational_memory=options)


@pytest.mark.parametrize(("extractor", "field", "reason"), [
    ({"name": "x", "instructions": "a", "metadataKey": "extracted.x"}, "metadataKey", "use metadataKeyPath"),
    ({"name": "x", "instructions": "a", "transform": str.upper}, "transform", "use onExtracted"),
    ({"name": "x", "instructions": "a", "slug": "y"}, "slug", "derived from name"),
    ({"name": "x", "mode": "hook", "onExtracted": on_extracted}, "mode", "not supported here"),
    ({"name": "x", "instructions": "a", "retryStructuredExtractionOnEmptyObject": True},
     "retryStructuredExtractionOnEmptyObject", "not supported here"),
    ({"name": "x", "instructions": 3}, "instructions", "string or a function"),
    ({"name": "x", "instructions": "a", "metadataKeyPath": True}, "metadataKeyPath", "must be false or a dotted"),
    ({"name": "x", "instructions": "a", "metadataKeyPath": "threadTitle"}, "metadataKeyPath", "OM's own fields"),
    ({"name": "Message", "instructions": "a"}, "name", "reserved"),  # one of Mastra's reserved tags
    ({"name": "2nd try", "instructions": "a"}, "name", "starts with a letter"),
])
def test_extractor_options_are_mastras(extractor: dict[str, Any], field: str, reason: str) -> None:
    with pytest.raises(ValueError, match=re.escape(f"observation.extract[0].{field} ") + ".*" + re.escape(reason)):
        observational_memory_options({"observation": {"extract": [extractor]}})


def test_an_extractors_slug_is_derived_from_its_name_and_read_only() -> None:
    extractor = Extractor(name="User's  \"favourite\" Café!", instructions="a")
    assert extractor.slug == "users-favourite-caf" and extractor.metadata_key_path == "extracted.users-favourite-caf"
    with pytest.raises(dataclasses.FrozenInstanceError):
        extractor.slug = "other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        Extractor(name="x", instructions="a", slug="y")  # type: ignore[call-arg]
    [parsed] = observational_memory_options({"observation": {"extract": [extractor]}}).observation.extract
    assert parsed == extractor
    with pytest.raises(ValueError, match=r"extract\[1\]\.name .* already used"):
        observational_memory_options({"observation": {"extract": [extractor, {"name": "users favourite caf",
                                                                              "instructions": "b"}]}})
