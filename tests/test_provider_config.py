"""Provider configuration that never fails silently (issue 8.4).

Keys come from the settings (environment and ``.env``); every litellm provider is accepted,
with the variables litellm says it needs; who answers each agent is logged at start and
shown in ``/health``; with ``DEV_SERVER_LOCAL_FALLBACK=false`` a missing key is a 503
naming the variable, with nothing stored.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dev_server.kernel.model import ModelRequest
from dev_server.llm import LiteLLMClient, ModelProviderError, ModelResolver, prepare_litellm
from dev_server.provider_env import collect_provider_env
from dev_server.settings import Settings, SettingsError
from tests.fake_provider import REPLY, FakeProvider
from tests.kit.local_http import local_http
from tests.kit.servers import serving
from tests.support import sqlite_rows, user_message, wait_models_ready

KEY = "sk-test-not-a-real-key-0123456789"


def resolver(env: dict[str, str], **options: Any) -> ModelResolver:
    return ModelResolver(prepare_litellm(), env, **options)


# -- settings --------------------------------------------------------------------------------


def test_provider_keys_come_from_the_env_file_and_the_environment(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    env_file = tmp_path / ".env"
    env_file.write_text(f"OPENAI_API_KEY={KEY}\nGROQ_API_KEY=from-file\nAWS_REGION_NAME=eu-west-1\n"
                        "UNRELATED=1\nDEV_SERVER_MODEL_RETRIES=3\n")
    monkeypatch.setenv("GROQ_API_KEY", "from-environment")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    settings = Settings.load(env_file)
    assert {k: settings.provider_env.get(k) for k in ("OPENAI_API_KEY", "GROQ_API_KEY", "AWS_REGION_NAME",
                                                      "OPENAI_BASE_URL", "UNRELATED")} == {
        "OPENAI_API_KEY": KEY, "GROQ_API_KEY": "from-environment", "AWS_REGION_NAME": "eu-west-1",
        "OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "UNRELATED": None}
    assert settings.model_retries == 3
    # and the .env key makes the provider answer instead of the local model
    client = LiteLLMClient.from_settings(settings)
    assert asyncio.run(client.resolve("openai/gpt-4o-mini")).is_local is False


def test_provider_env_ignores_empty_values() -> None:
    assert collect_provider_env({"OPENAI_API_KEY": " ", "ANTHROPIC_API_KEY": KEY}, None) == {"ANTHROPIC_API_KEY": KEY}


@pytest.mark.parametrize(("name", "value"), [("DEV_SERVER_MODEL_TIMEOUT_S", "soon"),
                                             ("DEV_SERVER_MODEL_RETRIES", "-1"),
                                             ("DEV_SERVER_MODEL_FIRST_TOKEN_TIMEOUT_S", "0"),
                                             ("DEV_SERVER_LOCAL_FALLBACK", "maybe")])
def test_invalid_model_settings_name_the_variable(monkeypatch: pytest.MonkeyPatch, name: str, value: str) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(SettingsError, match=name):
        Settings.load()


# -- every litellm provider ----------------------------------------------------------------


@pytest.mark.parametrize(("mastra_id", "env", "litellm_model"), [
    ("ollama/llama3", {}, "ollama/llama3"),  # needs nothing: called at its default base URL
    ("groq/llama-3.1-8b-instant", {"GROQ_API_KEY": KEY}, "groq/llama-3.1-8b-instant"),
    ("openrouter/meta-llama/llama-3-8b", {"OPENROUTER_API_KEY": KEY}, "openrouter/meta-llama/llama-3-8b"),
    ("azure/my-deployment", {"AZURE_API_KEY": KEY, "AZURE_API_BASE": "https://x.openai.azure.com",
                             "AZURE_API_VERSION": "2024-06-01"}, "azure/my-deployment"),
    ("bedrock/anthropic.claude-3-haiku-20240307-v1:0", {"AWS_ACCESS_KEY_ID": "AKIA", "AWS_SECRET_ACCESS_KEY": "s"},
     "bedrock/anthropic.claude-3-haiku-20240307-v1:0"),
    ("vertex_ai/gemini-1.5-pro", {"VERTEXAI_PROJECT": "p", "VERTEXAI_LOCATION": "europe-west4"},
     "vertex_ai/gemini-1.5-pro"),
    ("google/gemini-2.5-flash", {"GOOGLE_GENERATIVE_AI_API_KEY": KEY}, "gemini/gemini-2.5-flash"),
])
def test_any_litellm_provider_is_called_when_configured(mastra_id: str, env: dict[str, str],
                                                        litellm_model: str) -> None:
    resolved = resolver(env).resolve(mastra_id)
    assert (resolved.litellm_model, resolved.is_local, resolved.missing) == (litellm_model, False, ())


@pytest.mark.parametrize(("mastra_id", "missing"), [
    ("azure/my-deployment", "AZURE_API_BASE"),
    ("bedrock/anthropic.claude-3-haiku-20240307-v1:0", "AWS_ACCESS_KEY_ID"),
    ("vertex_ai/gemini-1.5-pro", "VERTEXAI_PROJECT"),
    ("groq/llama-3.1-8b-instant", "GROQ_API_KEY"),
])
def test_unconfigured_providers_fall_back_and_say_why(mastra_id: str, missing: str) -> None:
    resolved = resolver({}).resolve(mastra_id)
    assert resolved.is_local and missing in resolved.missing
    assert resolved.describe().startswith("local model (") and missing in resolved.describe()


def test_call_kwargs_carry_keys_base_urls_and_cloud_credentials() -> None:
    models = resolver({"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
                       "GROQ_API_KEY": KEY, "GROQ_API_BASE": "http://127.0.0.1:8/v1",
                       "AWS_ACCESS_KEY_ID": "AKIA", "AWS_SECRET_ACCESS_KEY": "s", "AWS_REGION_NAME": "eu-west-1"})
    assert models.call_kwargs(models.resolve("openai/gpt-4o-mini")) == {"api_key": KEY,
                                                                         "api_base": "http://127.0.0.1:9/v1"}
    assert models.call_kwargs(models.resolve("groq/llama-3.1-8b-instant"))["api_base"] == "http://127.0.0.1:8/v1"
    bedrock = models.call_kwargs(models.resolve("bedrock/anthropic.claude-3-haiku-20240307-v1:0"))
    assert bedrock == {"aws_access_key_id": "AKIA", "aws_secret_access_key": "s", "aws_region_name": "eu-west-1"}
    assert KEY not in repr(models.resolve("openai/gpt-4o-mini"))


def test_without_fallback_a_missing_key_is_a_503_naming_it() -> None:
    with pytest.raises(ModelProviderError) as info:
        resolver({}, fallback=False).resolve("openai/gpt-4o-mini")
    assert (info.value.status, info.value.kind) == (503, "not_configured")
    assert "OPENAI_API_KEY" in info.value.message and "DEV_SERVER_LOCAL_FALLBACK" in info.value.message


@pytest.mark.anyio
async def test_a_request_carries_its_resolved_model(monkeypatch: pytest.MonkeyPatch) -> None:
    client = LiteLLMClient(environ={})
    resolved = await client.resolve("openai/gpt-4o-mini")
    resolver_ = await client.resolver()
    calls: list[str] = []
    real = resolver_.resolve
    monkeypatch.setattr(resolver_, "resolve", lambda mastra_id: calls.append(mastra_id) or real(mastra_id))
    events = [e async for e in client.stream(ModelRequest(resolved, [{"role": "user", "content": "hi"}]))]
    assert events and calls == []  # not resolved a second time


# -- a real gateway ------------------------------------------------------------------------
# In this process (its start-up lines are read from the captured log), except the one whose
# provider needs litellm: only a process of its own shows that its warm-up imported litellm.


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    with FakeProvider() as provider:
        yield provider


def test_start_logs_and_health_name_the_local_fallback(data_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="dev_server")
    with serving("gateway", data_dir, {"DEV_SERVER_TELEMETRY": "false"}) as gateway:
        models = local_http.get(f"{gateway.url}/health", timeout=10).json()["models"]
        chat_agent = models["agents"]["chat-agent"]
        assert (chat_agent["local"], chat_agent["model"], chat_agent["reason"]) == (True, "openai/gpt-4o-mini",
                                                                                    "OPENAI_API_KEY not set")
        assert set(models["agents"]) == {"chat-agent", "docs-agent", "orchestrator-agent"}
        assert "chat-agent -> local model (OPENAI_API_KEY not set)" in caplog.text


def test_start_logs_and_health_name_the_provider(start_server: Any, fake: FakeProvider) -> None:
    gateway = start_server("gateway", env={"DEV_SERVER_TELEMETRY": "false", "OPENAI_API_KEY": KEY,
                                           "OPENAI_BASE_URL": fake.base_url})
    models = wait_models_ready(gateway)["models"]
    assert models["litellmLoaded"] is True  # a configured provider: imported by the warm-up, before the first chat
    chat_agent = models["agents"]["chat-agent"]
    assert (chat_agent["local"], chat_agent["answeredBy"]) == (False, "openai/gpt-4o-mini")
    assert chat_agent["reason"] == "configured, custom base URL"
    assert KEY not in str(chat_agent) and fake.base_url not in str(chat_agent)
    assert "chat-agent -> openai/gpt-4o-mini" in gateway.output()
    body = {"conversationId": "t1", "messages": [user_message("u1", "hello")]}
    response = local_http.post(f"{gateway.url}/api/chat", json=body, timeout=30)
    assert response.status_code == 200 and REPLY.split()[-1] in response.text
    # the reply's title job may ask the same provider in the background; the turn asked once
    assert len(fake.turn_bodies()) == 1


def test_without_fallback_a_turn_is_a_503_and_nothing_is_stored(data_dir: Path,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    env = {"DEV_SERVER_TELEMETRY": "false", "DEV_SERVER_LOCAL_FALLBACK": "false"}
    with serving("gateway", data_dir, env) as gateway:
        health = local_http.get(f"{gateway.url}/health", timeout=10).json()
        assert health["models"]["agents"]["chat-agent"]["missing"] == ["OPENAI_API_KEY"]
        assert "ERROR" in caplog.text and "chat-agent -> error:" in caplog.text
        body = {"conversationId": "t-nokey", "messages": [user_message("u1", "hello")]}
        response = local_http.post(f"{gateway.url}/api/chat", json=body, timeout=30)
        assert response.status_code == 503 and response.json()["kind"] == "not_configured"
        assert "OPENAI_API_KEY" in response.json()["error"]
        assert sqlite_rows(data_dir / "dev-server.db", "SELECT count(*) FROM messages") == [(0,)]


def test_a_turn_with_memory_names_its_thread_and_resource_to_the_provider(data_dir: Path,
                                                                           fake: FakeProvider) -> None:
    """As Mastra does, every model call of a turn with memory carries ``x-thread-id`` and
    ``x-resource-id`` (litellm's ``extra_headers``); a run without a thread carries neither."""
    env = {"DEV_SERVER_TELEMETRY": "false", "OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": fake.base_url}
    with serving("gateway", data_dir, env) as gateway:
        body = {"conversationId": "headed", "messages": [user_message("u1", "hello")]}
        assert local_http.post(f"{gateway.url}/api/chat", json=body, timeout=30).status_code == 200
    with serving("studio", data_dir, env) as studio:
        run = {"messages": "hello"}  # no memory: no thread
        assert local_http.post(f"{studio.url}/api/agents/chat-agent/generate", json=run, timeout=30).status_code == 200
    turns = [headers for body, headers in zip(fake.bodies, fake.headers, strict=True) if body in fake.turn_bodies()]
    assert len(turns) == 2
    assert (turns[0]["x-thread-id"], turns[0]["x-resource-id"]) == ("headed", "ai-chat")
    assert "x-thread-id" not in turns[1]
