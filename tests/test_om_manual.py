"""Issue 14 items 4-6 without a gateway: the standalone ``ObservationalMemory`` (a store and a
model), its hooks with ``trigger: "manual"``, model selection (``ModelByInputTokens``, a
model list falling over, ``modelSettings`` / ``providerOptions`` reaching litellm) and
option validation. Real SQLite files in temp dirs; the local model observes and reflects;
the failing model is the fake OpenAI-compatible provider answering HTTP 500."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from dev_server.kernel.messages import Thread
from dev_server.kernel.model import ModelRequest
from dev_server.llm import LiteLLMClient
from dev_server.llm.scripted import ScriptedModel
from dev_server.om.manual import ObservationalMemory, as_message
from dev_server.om.options.config import observational_memory_options
from dev_server.om.options.models import ModelByInputTokens, ModelWithRetries, parse_model_choice
from dev_server.storage.conversations import ConversationStore
from dev_server.storage.libsql import LibSQLStore
from tests.fake_provider import FakeProvider

FACT = "My name is Ada Lovelace and I am planning a hiking trip to the Alps with my two kids next summer."
SMALL = {"observation": {"messageTokens": 500, "bufferTokens": False}, "reflection": {"observationTokens": 100000}}


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    with FakeProvider() as provider:
        yield provider


def recorder(events: list[tuple[str, dict[str, Any]]], name: str, *, is_async: bool = False) -> Any:
    if is_async:
        async def hook(event: dict[str, Any]) -> None:
            events.append((name, event))
        return hook
    return lambda event: events.append((name, event))


def all_hooks(events: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    names = ("onObservationStart", "onObservationEnd", "onReflectionStart", "onReflectionEnd")
    return {n: recorder(events, n, is_async=i % 2 == 1) for i, n in enumerate(names)}


async def store_with(libsql: LibSQLStore, thread: str = "t1", resource: str = "r1") -> ConversationStore:
    store = ConversationStore(libsql)
    await store.save_thread(Thread(thread, resource))
    return store


def chat(n: int) -> list[dict[str, Any]]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": f"Turn {i}. {FACT}",
             "createdAt": f"2026-01-01T10:{i:02d}:00.000Z"} for i in range(n)]


@pytest.mark.anyio
async def test_standalone_observe_and_reflect_call_every_hook_with_manual_and_usage(libsql: LibSQLStore) -> None:
    events: list[tuple[str, dict[str, Any]]] = []
    om = ObservationalMemory(await store_with(libsql), model="local/observer",
                             options={**SMALL, "hooks": all_hooks(events)}, llm=LiteLLMClient())
    observed = await om.observe("t1", "r1", messages=chat(4))
    assert observed.observed and "Ada Lovelace" in observed.record.active_observations
    assert [n for n, _ in events] == ["onObservationStart", "onObservationEnd"]
    end = events[-1][1]
    assert end["trigger"] == "manual" and end["threadId"] == "t1" and end["resourceId"] == "r1"
    assert end["error"] is None and end["model"] == "local/observer"
    assert end["usage"]["inputTokens"] > 0 and end["usage"]["outputTokens"] > 0
    assert end["usage"]["totalTokens"] == end["usage"]["inputTokens"] + end["usage"]["outputTokens"]
    assert end["providerMetadata"] == {"local": end["calls"][0]["providerMetadata"]["local"]}
    events.clear()
    reflected = await om.reflect("t1", "r1")
    assert reflected.reflected and reflected.record.generation_count == 1
    assert [n for n, _ in events][0] == "onReflectionStart" and events[-1][0] == "onReflectionEnd"
    assert events[-1][1]["trigger"] == "manual" and events[-1][1]["usage"]["outputTokens"] > 0
    assert (await om.get_record("t1", "r1")).generation_count == 1


@pytest.mark.anyio
async def test_a_raising_hook_is_logged_and_the_cycle_goes_on(libsql: LibSQLStore,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    ends: list[dict[str, Any]] = []

    async def broken(event: dict[str, Any]) -> None:
        raise RuntimeError("hook bug")

    om = ObservationalMemory(await store_with(libsql), model="local/observer",
                             options={**SMALL,
                                      "hooks": {"onObservationStart": broken, "onObservationEnd": ends.append}},
                             llm=LiteLLMClient())
    result = await om.observe("t1", "r1", messages=chat(2))
    assert result.observed and result.record.active_observations
    assert ends and ends[0]["error"] is None
    assert "onObservationStart raised" in caplog.text


@pytest.mark.anyio
async def test_a_failed_cycle_reaches_the_end_hook_with_its_error(libsql: LibSQLStore) -> None:
    ends: list[dict[str, Any]] = []
    om = ObservationalMemory(await store_with(libsql), model="local/observer",
                             options={**SMALL, "hooks": {"onObservationEnd": ends.append}}, llm=LiteLLMClient())
    result = await om.observe("t1", "r1", messages=[{"role": "user", "content": "Please [[observer-fail]] now"}])
    assert not result.observed and result.record.active_observations == ""
    assert ends and ends[0]["error"] and ends[0]["trigger"] == "manual"
    assert any(p["type"] == "data-om-observation-failed" for p in result.parts)


@pytest.mark.anyio
async def test_resource_scope_observes_every_threads_unobserved_messages_and_reflects_the_resources_log(
        libsql: LibSQLStore) -> None:
    events: list[tuple[str, dict[str, Any]]] = []
    store = await store_with(libsql, "t1", "r1")
    await store.save_thread(Thread("t2", "r1"))
    await store.save_thread(Thread("other", "r2"))  # another resource's thread: never gathered
    for thread in ("t1", "t2", "other"):
        await store.append_messages(thread, [as_message(m, thread, "r2" if thread == "other" else "r1")
                                             for m in chat(3)])
    om = ObservationalMemory(store, model="local/observer",
                             options={**SMALL, "scope": "resource", "hooks": all_hooks(events)}, llm=LiteLLMClient())
    observed = await om.observe("t1", "r1")
    assert observed.observed
    record = observed.record
    assert record.scope == "resource" and record.resource_id == "r1" and record.thread_id is None
    assert '<thread id="t1">' in record.active_observations and '<thread id="t2">' in record.active_observations
    assert "Ada Lovelace" in record.active_observations and len(record.observed_message_ids or []) == 6
    assert [n for n, _ in events] == ["onObservationStart", "onObservationEnd"]
    assert events[-1][1]["trigger"] == "manual" and events[-1][1]["recordId"] == record.id
    assert events[-1][1]["error"] is None and events[-1][1]["usage"]["outputTokens"] > 0
    # both threads' cursors moved: nothing is left to observe, from either thread
    t2 = (await store.get_thread("t2")).metadata["mastra"]["om"]
    assert t2["lastObservedAt"]  # resource scope: each thread's own cursor, besides Mastra's other keys
    assert {"lastObservedAt", "currentTask", "suggestedResponse", "extracted", "lastObservedMessageCursor"} <= set(t2)
    again = await om.observe("t2", "r1")
    assert not again.observed and again.record.id == record.id
    events.clear()
    reflected = await om.reflect("t2", "r1")
    assert reflected.reflected and reflected.record.generation_count == 1 and reflected.record.scope == "resource"
    assert [n for n, _ in events][0] == "onReflectionStart" and events[-1][1]["trigger"] == "manual"
    assert (await om.get_record("t1", "r1")).id == reflected.record.id


@pytest.mark.anyio
async def test_model_by_input_tokens_picks_the_small_and_the_large_model(libsql: LibSQLStore) -> None:
    ends: list[dict[str, Any]] = []
    choice = ModelByInputTokens({3000: "local/small", 200000: "local/large"})
    om = ObservationalMemory(await store_with(libsql), model=choice,
                             options={**SMALL, "hooks": {"onObservationEnd": ends.append}}, llm=LiteLLMClient())
    await om.observe("t1", "r1", messages=chat(1))
    long = [{"role": "user", "content": f"Turn {i}. {FACT} " * 20, "createdAt": f"2026-01-02T10:{i:02d}:00.000Z"}
            for i in range(12)]
    await om.observe("t1", "r1", messages=long)
    assert [e["model"] for e in ends] == ["local/small", "local/large"]


async def model_list_om(libsql: LibSQLStore, fake: FakeProvider,
                        models: list[dict[str, Any]]) -> tuple[ObservationalMemory, list[dict[str, Any]]]:
    """A standalone OM observing with ``models`` in turn (the OpenAI ones answered by the fake
    provider), and the list its end hook fills."""
    llm = LiteLLMClient(environ={"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": fake.base_url})
    ends: list[dict[str, Any]] = []
    om = ObservationalMemory(await store_with(libsql), model=models, llm=llm,
                             options={**SMALL, "hooks": {"onObservationEnd": ends.append}})
    return om, ends


@pytest.mark.anyio
async def test_a_failing_first_model_falls_over_to_the_second(libsql: LibSQLStore, fake: FakeProvider) -> None:
    om, ends = await model_list_om(libsql, fake, [{"model": "openai/gpt-4o-mini", "maxRetries": 1},
                                                  {"model": "local/backup", "maxRetries": 0}])
    result = await om.observe("t1", "r1", messages=[{"role": "user", "content": f"{FACT} [[fault:status=500]]"}])
    assert result.observed
    assert fake.requests == 2  # the first model: its attempt and its one retry
    assert ends[0]["model"] == "local/backup" and ends[0]["error"] is None
    # the hook sees both attempts: the failed one with its model and error (no usage reported)
    failed, answered = ends[0]["calls"]
    assert failed["model"] == "openai/gpt-4o-mini" and failed["error"] and failed["usage"] is None
    assert failed["providerMetadata"] is None
    assert answered["model"] == "local/backup" and answered["error"] is None
    assert ends[0]["usage"] == answered["usage"]


@pytest.mark.anyio
async def test_a_failed_attempt_that_reported_usage_is_counted_in_the_cycle_usage(libsql: LibSQLStore,
                                                                                 fake: FakeProvider) -> None:
    om, ends = await model_list_om(libsql, fake, [{"model": "openai/gpt-4o-mini", "maxRetries": 0},
                                                  {"model": "local/backup", "maxRetries": 0}])
    # the provider bills 11 input tokens, then sends no content: a failed call that reported usage
    result = await om.observe("t1", "r1", messages=[{"role": "user", "content": f"{FACT} [[fault:empty_usage]]"}])
    assert result.observed and fake.requests == 1
    end = ends[0]
    failed, answered = end["calls"]
    assert failed["model"] == "openai/gpt-4o-mini" and "no content" in failed["error"]
    assert failed["usage"] == {"inputTokens": 11, "outputTokens": 0, "totalTokens": 11, "reasoningTokens": 0,
                               "cachedInputTokens": 0}
    assert answered["model"] == "local/backup" and answered["usage"]["outputTokens"] > 0
    assert end["usage"]["inputTokens"] == 11 + answered["usage"]["inputTokens"]
    assert end["usage"]["totalTokens"] == 11 + answered["usage"]["totalTokens"]
    assert end["model"] == "local/backup" and end["error"] is None


@pytest.mark.anyio
async def test_when_every_model_fails_each_attempt_reaches_the_end_hook(libsql: LibSQLStore,
                                                                      fake: FakeProvider) -> None:
    om, ends = await model_list_om(libsql, fake, [{"model": "openai/gpt-4o-mini", "maxRetries": 0},
                                                  {"model": "openai/gpt-4o", "maxRetries": 0}])
    result = await om.observe("t1", "r1", messages=[{"role": "user", "content": f"{FACT} [[fault:status=500]]"}])
    assert not result.observed and ends[0]["error"]
    assert [(c["model"], bool(c["error"])) for c in ends[0]["calls"]] == [("openai/gpt-4o-mini", True),
                                                                          ("openai/gpt-4o", True)]
    assert ends[0]["model"] == "openai/gpt-4o" and ends[0]["providerMetadata"] is None


@pytest.mark.anyio
async def test_model_settings_and_provider_options_reach_litellm(libsql: LibSQLStore, fake: FakeProvider) -> None:
    llm = LiteLLMClient(environ={"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": fake.base_url})
    options = {"observation": {"messageTokens": 500, "bufferTokens": False,
                               "modelSettings": {"topP": 0.5, "maxOutputTokens": 1234, "seed": 7},
                               "providerOptions": {"openai": {"user": "om-test"}, "google": {"ignored": 1}}}}
    om = ObservationalMemory(await store_with(libsql), model="openai/gpt-4o-mini", llm=llm, options=options)
    await om.observe("t1", "r1", messages=chat(1))  # the fake's answer is not an observation: no matter
    body = fake.bodies[0]
    assert (body["top_p"], body["max_tokens"], body["seed"], body["user"]) == (0.5, 1234, 7, "om-test")
    assert "ignored" not in body and "temperature" not in body  # none configured, not Mastra's default model


@pytest.mark.anyio
@pytest.mark.parametrize(("model", "settings", "observer", "reflector"), [
    # Mastra's default model: its temperatures, output limit and Google thinking budgets
    ("default", {}, (0.3, 100_000, 215), (0.0, 100_000, 1024)),
    # another Google model: the thinking budgets only (Mastra's default providerOptions)
    ("google/gemini-2.5-pro", {}, (None, None, 215), (None, None, 1024)),
    # any other model: nothing the user did not configure
    ("openai/gpt-4o-mini", {}, (None, None, None), (None, None, None)),
    ("openai/gpt-4o-mini", {"modelSettings": {"temperature": 0.7}}, (0.7, None, None), (None, None, None)),
])
async def test_mastras_default_settings_reach_only_the_models_mastra_gives_them(
        libsql: LibSQLStore, model: str, settings: dict[str, Any], observer: tuple[Any, ...],
        reflector: tuple[Any, ...]) -> None:
    scripted = ScriptedModel(local=False)  # every OM call answered by the local model, and recorded
    options = {**SMALL, "observation": {**SMALL["observation"], **settings}}
    om = ObservationalMemory(await store_with(libsql), model=model, llm=scripted, options=options)
    assert (await om.observe("t1", "r1", messages=chat(2))).observed
    assert (await om.reflect("t1", "r1")).reflected

    def sent(request: ModelRequest) -> tuple[Any, ...]:
        thinking = (request.options or {}).get("thinking")
        return request.temperature, request.max_tokens, thinking["budget_tokens"] if thinking else None

    assert sent(scripted.requests_for("observer")[0]) == observer
    assert sent(scripted.requests_for("reflector")[0]) == reflector


@pytest.mark.parametrize(("options", "field"), [
    ({"model": {"upTo": {5000: "a/b", 1000: "c/d"}}}, "observationalMemory.model.upTo"),
    ({"model": {"upTo": {}}}, "observationalMemory.model.upTo"),
    ({"observation": {"model": []}}, "observationalMemory.observation.model"),
    ({"reflection": {"model": [{"model": "a/b", "maxRetries": -1}]}},
     "observationalMemory.reflection.model[0].maxRetries"),
    ({"model": [{"model": "a/b", "retries": 2}]}, "observationalMemory.model[0].retries"),
    ({"hooks": {"onObservationEnd": "print"}}, "observationalMemory.hooks.onObservationEnd"),
    ({"hooks": {"onObserve": print}}, "observationalMemory.hooks.onObserve"),
    ({"hooks": [print]}, "observationalMemory.hooks"),
    ({"observation": {"modelSettings": {"top_p": 1}}}, "observationalMemory.observation.modelSettings.top_p"),
    ({"reflection": {"providerOptions": {"openai": 3}}}, "observationalMemory.reflection.providerOptions"),
])
def test_every_invalid_option_fails_at_construction_naming_its_field(options: dict[str, Any], field: str) -> None:
    with pytest.raises(ValueError) as caught:
        observational_memory_options(options)
    assert str(caught.value).startswith(field + " ")


def test_model_forms_parse_to_one_choice() -> None:
    choice = parse_model_choice("model", [{"model": {"upTo": {"1000": "a/small", 9000: "a/big"}}, "maxRetries": 2},
                                          ModelWithRetries("b/other")])
    assert choice.candidates[0].pick(999) == "a/small" and choice.candidates[0].pick(5000) == "a/big"
    assert choice.candidates[0].pick(10**6) == "a/big"  # past the last threshold: the last model
    assert choice.candidates[0].max_retries == 2 and choice.candidates[1].max_retries is None
    assert parse_model_choice("model", None).default
    with pytest.raises(ValueError, match="increasing order"):
        ModelByInputTokens({10: "c/d", 5: "e/f"})
    options = observational_memory_options({"model": ModelByInputTokens({100: "a/b"})})
    assert options.observer_choice == options.reflector_choice and options.observer_model == "a/b"
