"""What a process checks before it serves (issue 29, items 4 and 5).

A server reachable beyond this machine without auth refuses to start unless auth is off on
purpose; a setting whose mistake would only show later (a traceback, a hang, a SQLite file
named after a Postgres URL, every turn or OM cycle failing) stops the start with one line
naming it and exit 2; a provider that cannot be reached is named with its URL. Where the
process's exit is the subject, the command runs (``tests/kit/cli.py``); the rules themselves
are checked in this process.
"""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest

from dev_server.agents.registry import DEFINITIONS
from dev_server.kernel.model import ModelRequest
from dev_server.llm import LiteLLMClient, ModelProviderError
from dev_server.llm.models import shown_url
from dev_server.preflight import check_agent_names, check_exposure, check_models, is_loopback, model_settings
from dev_server.settings import Settings, SettingsError
from tests.kit.cli import assert_one_error_line, run_cli
from tests.kit.local_http import local_http
from tests.kit.servers import serving, settings_from_env
from tests.support import REPO, free_port, user_message

# -- exposure: auth, or off on purpose --------------------------------------------------------


@pytest.mark.parametrize("command", ["gateway", "studio", "dev"])
def test_a_non_loopback_host_without_tokens_refuses_to_start(server_env: dict[str, str], command: str):
    result = run_cli([command, "--host", "0.0.0.0"], server_env)
    assert_one_error_line(result, "refusing to listen on 0.0.0.0 without auth", "DEV_SERVER_AUTH_TOKENS=",
                          "DEV_SERVER_AUTH=off")
    hosted = run_cli([command], {**server_env, "DEV_SERVER_HOST": "::"})  # the setting, not only the flag
    assert_one_error_line(hosted, "refusing to listen on :: without auth")


@pytest.mark.parametrize("auth", [{"DEV_SERVER_AUTH": "off"}, {"DEV_SERVER_AUTH_TOKENS": "tok-alice=alice"}])
def test_on_every_interface_with_tokens_or_auth_off_it_serves(start_server, auth: dict[str, str]):
    gateway = start_server("gateway", env={"DEV_SERVER_HOST": "0.0.0.0", **auth})
    assert "listening on http://0.0.0.0:" in gateway.output()
    chat = local_http.post(f"{gateway.url}/api/chat", json={"messages": [user_message("u1", "hi")]}, timeout=30)
    assert chat.status_code == (401 if "DEV_SERVER_AUTH_TOKENS" in auth else 200)


@pytest.mark.parametrize("host, loopback", [("127.0.0.1", True), ("127.3.2.1", True), ("::1", True),
                                            ("[::1]", True), ("localhost", True), ("LocalHost", True),
                                            ("0.0.0.0", False), ("::", False), ("", False),
                                            ("192.168.1.20", False), ("fe80::1", False), ("my-host.lan", False)])
def test_only_loopback_addresses_and_localhost_count_as_this_machine(host: str, loopback: bool):
    assert is_loopback(host) is loopback


def test_the_exposure_rule_in_every_combination():
    check_exposure(Settings(), "127.0.0.1")  # make dev: no auth, as before
    check_exposure(Settings(auth_tokens="t=alice"), "0.0.0.0")
    check_exposure(Settings(auth_tokens="t=alice", auth="on"), "0.0.0.0")
    check_exposure(Settings(auth="off"), "0.0.0.0")
    with pytest.raises(SettingsError, match="refusing to listen on 10.0.0.5 without auth"):
        check_exposure(Settings(), "10.0.0.5")


def test_auth_on_needs_tokens_and_off_contradicts_them(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("DEV_SERVER_AUTH", "on")
    with pytest.raises(SettingsError, match="DEV_SERVER_AUTH=on needs DEV_SERVER_AUTH_TOKENS"):
        Settings.load()
    monkeypatch.setenv("DEV_SERVER_AUTH", "off")
    monkeypatch.setenv("DEV_SERVER_AUTH_TOKENS", "tok=alice")
    with pytest.raises(SettingsError, match="DEV_SERVER_AUTH=off contradicts DEV_SERVER_AUTH_TOKENS"):
        Settings.load()
    monkeypatch.setenv("DEV_SERVER_AUTH", "maybe")
    with pytest.raises(SettingsError, match="invalid setting DEV_SERVER_AUTH='maybe'"):
        Settings.load()
    monkeypatch.setenv("DEV_SERVER_AUTH", "")  # empty is unset
    monkeypatch.setenv("DEV_SERVER_AUTH_TOKENS", "")
    assert (Settings.load().auth, Settings.load().auth_tokens) == (None, None)


# -- malformed tokens: one line, never the tokens, no hang ------------------------------------


@pytest.mark.parametrize("spec, problem", [("s3cret-alice", "pair 1 is not token=principal"),
                                           ("s3cret=alice,s3cret-bob", "pair 2 is not token=principal"),
                                           ("=alice", "pair 1 is not token=principal"),
                                           ("s3cret=", "pair 1 is not token=principal"),
                                           ("s3cret=@service", "pair 1 names the reserved principal @service"),
                                           (" , ", "no token=principal pair")])
def test_malformed_tokens_are_one_line_naming_the_setting_and_not_the_tokens(monkeypatch: pytest.MonkeyPatch,
                                                                             spec: str, problem: str):
    monkeypatch.setenv("DEV_SERVER_AUTH_TOKENS", spec)
    with pytest.raises(SettingsError) as info:
        Settings.load()
    message = str(info.value)
    assert message.startswith(f"invalid setting DEV_SERVER_AUTH_TOKENS: {problem}")
    assert "s3cret" not in message and "\n" not in message


def test_tokens_tolerate_spaces_around_their_parts(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("DEV_SERVER_AUTH_TOKENS", " tok-a = alice , tok-b=bob ")
    from dev_server.auth_tokens import token_principals

    assert token_principals(Settings.load().auth_tokens) == {"tok-a": "alice", "tok-b": "bob"}


def test_a_studio_with_malformed_tokens_exits_at_once_with_one_line(server_env: dict[str, str]):
    result = run_cli(["studio", "--port", str(free_port())], {**server_env, "DEV_SERVER_AUTH_TOKENS": "s3cret-alice"})
    assert_one_error_line(result, "DEV_SERVER_AUTH_TOKENS", "pair 1 is not token=principal")
    assert "s3cret" not in result.stderr


# -- database URLs ------------------------------------------------------------------------------


def test_a_postgres_url_stops_the_start_and_creates_no_file(server_env: dict[str, str], data_dir: Path):
    result = run_cli(["gateway", "--port", str(free_port())],
                     {**server_env, "DEV_SERVER_DB_URL": "postgres://app:pw@db.example/chat"})
    assert_one_error_line(result, "DEV_SERVER_DB_URL", "unsupported database URL scheme 'postgres:'")
    assert "pw@" not in result.stderr
    assert not data_dir.exists()  # today's bug: a SQLite file at .temp/postgres:/...


# -- model ids ----------------------------------------------------------------------------------


def test_an_om_model_without_its_provider_stops_the_start(server_env: dict[str, str]):
    result = run_cli(["gateway", "--port", str(free_port())], {**server_env, "DEV_SERVER_OM_MODEL": "gpt-4o-mini"})
    assert_one_error_line(result, "invalid setting DEV_SERVER_OM_MODEL", "'provider/model'", "'gpt-4o-mini'")


@pytest.mark.parametrize("env, setting, fragment", [
    ({"DEV_SERVER_MODEL": "antropic/claude-haiku-4-5"}, "DEV_SERVER_MODEL", "unknown model provider 'antropic'"),
    ({"DEV_SERVER_AGENT_MODELS": '{"docs-agent": "olama/llama3.2"}'}, "DEV_SERVER_AGENT_MODELS (docs-agent)",
     "unknown model provider 'olama'"),
    ({"DEV_SERVER_AGENT_OM_MODELS": '{"chat-agent": "nope/x"}'}, "DEV_SERVER_AGENT_OM_MODELS (chat-agent)",
     "unknown model provider 'nope'"),
    ({"DEV_SERVER_OM_MODEL": "opena/gpt-4o-mini"}, "DEV_SERVER_OM_MODEL", "unknown model provider 'opena'"),
    ({"DEV_SERVER_OM_OPTIONS": '{"observation": {"model": [{"model": "openai/gpt-4o-mini"}, {"model": "nope/x"}]}}'},
     "DEV_SERVER_OM_OPTIONS (observation.model)", "unknown model provider 'nope'"),
    ({"DEV_SERVER_OM_OPTIONS": '{"model": {"upTo": {"8000": "openai/gpt-4o-mini", "90000": "gemni/x"}}}'},
     "DEV_SERVER_OM_OPTIONS (model)", "unknown model provider 'gemni'"),
    ({"DEV_SERVER_EMBEDDER": "text-embedding-3-small"}, "DEV_SERVER_EMBEDDER", "'provider/model'"),
    ({"DEV_SERVER_EMBEDDER": "postgres/x"}, "DEV_SERVER_EMBEDDER", "unknown model provider 'postgres'"),
])
def test_unknown_providers_in_model_settings_are_one_line_naming_the_setting(tmp_path: Path, env: dict[str, str],
                                                                            setting: str, fragment: str):
    with pytest.raises(SettingsError) as info:
        check_models(settings_from_env(tmp_path, env))
    assert str(info.value).startswith(f"invalid setting {setting}: ") and fragment in str(info.value)


def test_model_settings_of_known_providers_pass(tmp_path: Path):
    settings = settings_from_env(tmp_path, {
        "DEV_SERVER_MODEL": "anthropic/claude-haiku-4-5", "DEV_SERVER_AGENT_MODELS": '{"docs-agent": "groq/llama"}',
        "DEV_SERVER_OM_MODEL": "default", "DEV_SERVER_AGENT_OM_MODELS": '{"chat-agent": "vertex_ai/gemini"}',
        "DEV_SERVER_EMBEDDER": "ollama/nomic-embed-text",
        "DEV_SERVER_OM_OPTIONS": '{"reflection": {"model": "default"}, "observation": {"model": "local/x"}}'})
    check_models(settings)
    assert list(model_settings(settings)) == [
        ("DEV_SERVER_MODEL", "anthropic/claude-haiku-4-5"),
        ("DEV_SERVER_AGENT_MODELS (docs-agent)", "groq/llama"),
        ("DEV_SERVER_AGENT_OM_MODELS (chat-agent)", "vertex_ai/gemini"),
        ("DEV_SERVER_OM_OPTIONS (observation.model)", "local/x"),
        ("DEV_SERVER_OM_OPTIONS (reflection.model)", "google/gemini-2.5-flash"),
        ("DEV_SERVER_EMBEDDER", "ollama/nomic-embed-text")]


def test_checking_models_of_the_providers_table_never_imports_litellm():
    code = ("import sys; from dev_server.preflight import check_models; from dev_server.settings import Settings; "
            "check_models(Settings(om_model='google/gemini-2.5-flash', embedder='openai/text-embedding-3-small')); "
            "print('litellm' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert result.stdout.strip() == "False", result.stderr


# -- settings that name agents ------------------------------------------------------------------


def test_a_setting_naming_no_agent_with_memory_stops_the_start(server_env: dict[str, str]):
    result = run_cli(["gateway", "--port", str(free_port())], {**server_env, "DEV_SERVER_WORKING_MEMORY": "chat-agnt"})
    assert_one_error_line(result, "invalid setting DEV_SERVER_WORKING_MEMORY: 'chat-agnt' is not one of the agents "
                          "with memory here (chat-agent, docs-agent)")


@pytest.mark.parametrize("settings, message", [
    (Settings(agent_models={"ghost": "openai/gpt-4o"}),
     "DEV_SERVER_AGENT_MODELS: 'ghost' is not one of the agents here (chat-agent, docs-agent, orchestrator-agent)"),
    (Settings(semantic_recall="orchestrator-agent"),
     "DEV_SERVER_SEMANTIC_RECALL: 'orchestrator-agent' is not one of the agents with memory here"),
    (Settings(agent_om_models={"docs-agent": "openai/gpt-4o"}),
     "DEV_SERVER_AGENT_OM_MODELS: 'docs-agent' is not one of the agents with Observational Memory here (chat-agent)"),
    (Settings(om_agents="chat-agent,docs-agent"),
     "DEV_SERVER_OM_AGENTS: 'docs-agent' is not one of the agents with Observational Memory here"),
])
def test_settings_name_agents_of_the_kind_they_apply_to(settings: Settings, message: str):
    with pytest.raises(SettingsError) as info:
        check_agent_names(settings, DEFINITIONS)
    assert str(info.value).startswith(f"invalid setting {message}")


def test_settings_naming_agents_that_exist_pass_and_a_default_names_none():
    check_agent_names(Settings(working_memory="chat-agent,docs-agent:thread", semantic_recall="docs-agent",
                               agent_models={"orchestrator-agent": "openai/gpt-4o"}, om_agents="chat-agent",
                               agent_om_models={"chat-agent": "default"}), DEFINITIONS)
    check_agent_names(Settings(), ())  # DEV_SERVER_OM_AGENTS's default (chat-agent) is not the user's naming
    with pytest.raises(SettingsError, match=r"'x' is not one of the agents with memory here \(none\)"):
        check_agent_names(Settings(working_memory="x"), ())


# -- a provider that cannot be reached ----------------------------------------------------------


def unreachable_provider() -> tuple[str, str]:
    """An OpenAI-compatible base URL nothing listens on (with a secret in its query), and how it is shown."""
    port = free_port()
    return f"http://127.0.0.1:{port}/v1?team=s3cret", f"http://127.0.0.1:{port}/v1 (OPENAI_BASE_URL)"


@pytest.mark.parametrize("name, value", [("OPENAI_BASE_URL", "localhost:8000/v1"), ("OLLAMA_API_BASE", "ollama:11434"),
                                         ("OPENAI_BASE_URL", "ftp://files.example/v1")])
def test_a_provider_base_url_that_is_no_http_url_stops_the_start(monkeypatch: pytest.MonkeyPatch, name: str,
                                                                  value: str):
    monkeypatch.setenv(name, value)
    with pytest.raises(SettingsError, match=f"invalid setting: {name} must be an http:// or https:// URL"):
        Settings.load()


@pytest.mark.parametrize("url, shown", [("http://user:s3cret@proxy.example:8443/v1?key=s3cret#x",
                                         "http://proxy.example:8443/v1"),
                                        ("https://[::1]/openai", "https://[::1]/openai"),
                                        ("localhost:11434", "(not a URL)")])
def test_a_shown_url_keeps_no_credentials_query_or_fragment(url: str, shown: str):
    assert shown_url(url) == shown


@pytest.mark.anyio
async def test_a_connection_error_names_the_url_and_its_variable_but_no_credentials():
    base_url, shown = unreachable_provider()
    llm = LiteLLMClient(environ={"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": base_url}, retries=0)
    with pytest.raises(ModelProviderError) as chat:
        async for _ in llm.stream(ModelRequest("openai/gpt-4o-mini", [{"role": "user", "content": "hi"}])):
            pass
    assert chat.value.kind == "connection" and chat.value.status == 502
    assert chat.value.message == f"Could not reach the model provider (openai) at {shown}."
    with pytest.raises(ModelProviderError) as embed:
        await llm.embed(["hello"], "openai/text-embedding-3-small")
    assert embed.value.kind == "connection" and shown in embed.value.message
    assert "s3cret" not in chat.value.message + embed.value.message
    await llm.aclose()


def test_the_client_and_the_log_both_get_the_url_that_failed(data_dir: Path, caplog: pytest.LogCaptureFixture):
    base_url, shown = unreachable_provider()
    env = {"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": base_url, "DEV_SERVER_MODEL_RETRIES": "0",
           "DEV_SERVER_TELEMETRY": "false"}
    with caplog.at_level(logging.WARNING), serving("gateway", data_dir, env) as gateway:
        response = local_http.post(f"{gateway.url}/api/chat", json={"messages": [user_message("u1", "hi")]}, timeout=30)
    assert response.status_code == 502
    assert response.json()["kind"] == "connection" and shown in response.json()["error"]
    failed = [r.getMessage() for r in caplog.records if r.getMessage().startswith("agent run failed")]
    assert failed and shown in failed[0] and "s3cret" not in failed[0]
