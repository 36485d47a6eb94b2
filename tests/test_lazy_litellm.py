"""litellm only where a model needs it (issue 26, item 4).

A process whose models all answer locally never imports litellm: ``dev_server.llm.known_providers``
says what the common providers need while none of their variables is set. The table is
checked against the installed litellm here (every model its model map lists, and every
variable it reads to resolve them), so an upgrade that changes litellm's answer fails these
tests instead of changing ours. Then the process-level behaviour: a gateway without keys
answers and reports ``models.ready`` without litellm, and a provider model with a key
imports it on first use.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from typing import Any

import pytest

from dev_server.llm import ModelResolver, prepare_litellm
from dev_server.llm.known_providers import EVERY_PROVIDER, KNOWN_PROVIDERS
from dev_server.llm.models import _isolated
from dev_server.settings import collect_provider_env
from tests.kit.local_http import local_http
from tests.support import REPO, free_port, user_message, wait_models_ready

UNKNOWN_MODEL = "a-model-litellm-has-never-heard-of"


@pytest.fixture(scope="module")
def litellm() -> Any:
    return prepare_litellm()


def listed_models(litellm: Any, provider: str) -> list[str]:
    """The model ids litellm's model map lists under ``provider`` (without the prefix), and one it does not."""
    ids = {name.removeprefix(f"{provider}/") for name in litellm.models_by_provider.get(provider, ())}
    return sorted(ids | {UNKNOWN_MODEL})


def mastra_ids(provider: str, model_id: str) -> list[str]:
    """The Mastra ids naming a litellm model: Mastra's ``google`` is litellm's ``gemini``, which works too."""
    return [f"google/{model_id}", f"gemini/{model_id}"] if provider == "gemini" else [f"{provider}/{model_id}"]


def own_unused_variable(provider: str) -> dict[str, str]:
    """A variable of the provider that litellm never reads: it sends the resolver down
    litellm's path without changing litellm's answer."""
    return {f"{KNOWN_PROVIDERS[provider].prefixes[0].rstrip('_')}_UNUSED_BY_LITELLM": "1"}


# -- the table against the installed litellm -----------------------------------------------


@pytest.mark.parametrize("fallback", [True, False])
def test_the_table_gives_litellms_answer_for_every_model_litellm_lists(litellm: Any, fallback: bool) -> None:
    table = ModelResolver(None, {}, fallback=fallback)  # no litellm: the table or a RuntimeError
    checked = 0
    for provider, known in KNOWN_PROVIDERS.items():
        unused = own_unused_variable(provider)
        through_litellm = ModelResolver(litellm, unused, fallback=fallback)
        missing_in = _isolated(litellm.validate_environment, {})
        for model_id in listed_models(litellm, provider):
            if model_id in known.other_routes:
                continue
            for mastra_id in mastra_ids(provider, model_id):
                assert not table.needs_litellm(mastra_id) and ModelResolver(None, unused).needs_litellm(mastra_id)
                answer = table.plan(mastra_id)
                assert answer == through_litellm.plan(mastra_id), mastra_id
                assert answer.describe() == through_litellm.plan(mastra_id).describe()
                _, _, fixed_key, default_base = litellm.get_llm_provider(f"{provider}/{model_id}")
                reported = missing_in(model=f"{provider}/{model_id}", api_key=fixed_key, api_base=default_base)
                assert answer.missing == known.required == tuple(reported["missing_keys"]), mastra_id
                assert answer.is_local is fallback and answer.reason == f"{', '.join(known.required)} not set"
                checked += 1
    assert checked > 1500  # every provider's whole model map, not a sample


def test_the_ids_the_table_leaves_to_litellm_are_answered_otherwise_by_it(litellm: Any) -> None:
    for provider, known in KNOWN_PROVIDERS.items():
        for model_id in known.other_routes:
            assert ModelResolver(None, {}).needs_litellm(f"{provider}/{model_id}")
            assert ModelResolver(litellm, {}).plan(f"{provider}/{model_id}").missing != known.required


class RecordingEnviron(dict):
    """An environment that notes every name looked up in it."""

    def __init__(self, base: dict[str, str], read: set[str]) -> None:
        super().__init__(base)
        self.read = read

    def get(self, name: str, *default: Any) -> Any:
        self.read.add(name)
        return super().get(name, *default)

    def __getitem__(self, name: str) -> Any:
        self.read.add(name)
        return super().__getitem__(name)

    def __contains__(self, name: object) -> bool:
        self.read.add(str(name))
        return super().__contains__(name)


def test_a_providers_prefixes_cover_every_variable_read_to_resolve_its_models(litellm: Any,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    for provider, known in KNOWN_PROVIDERS.items():
        read: set[str] = set()
        for model_id in listed_models(litellm, provider):
            model = f"{provider}/{model_id}"
            with monkeypatch.context() as patch:  # what litellm's provider lookup reads from the process
                patch.setattr(os, "environ", RecordingEnviron(dict(os.environ), read))
                _, llm_provider, fixed_key, default_base = litellm.get_llm_provider(model)
            _isolated(litellm.validate_environment, RecordingEnviron({}, read))(  # what it checks
                model=model, api_key=fixed_key, api_base=default_base)
            resolver = ModelResolver(litellm, {})
            resolver._env = RecordingEnviron({}, read)  # and the names our resolver looks up for the call
            resolver._credentials(model, llm_provider)
        foreign = {name for name in read if not name.startswith(known.prefixes) and name not in EVERY_PROVIDER}
        assert foreign <= {"PYDANTIC_DISABLE_PLUGINS"}, (provider, foreign)  # pydantic's own, not a provider's


def test_which_ids_need_litellm() -> None:
    plain = ModelResolver(None, {})
    for mastra_id in ("ollama/llama3", "azure/my-deployment", "cohere/command-r", "anthropic/claude-2",
                      "togetherai/x", "vllm/x"):
        assert plain.needs_litellm(mastra_id), mastra_id  # not in the table: keyless, model-dependent, unknown
        with pytest.raises(RuntimeError, match="needs litellm"):
            plain.plan(mastra_id)
    for mastra_id in ("openai/gpt-4o-mini", "google/gemini-2.5-flash", "local/echo"):
        assert not plain.needs_litellm(mastra_id)
    assert not plain.needs_litellm("no-slash")  # malformed: refused without litellm
    with pytest.raises(ValueError, match="provider/model"):
        plain.plan("no-slash")
    # One of its own variables (a key, a base URL, an alias) sends a provider to litellm...
    for env in ({"OPENAI_API_KEY": "k"}, {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}, {"USE_LITELLM_PROXY": "1"}):
        assert ModelResolver(None, env).needs_litellm("openai/gpt-4o-mini"), env
    assert ModelResolver(None, {"GOOGLE_GENERATIVE_AI_API_KEY": "k"}).needs_litellm("google/gemini-2.5-flash")
    # ... another provider's, or a general AWS setting in a shell, does not.
    others = ModelResolver(None, {"ANTHROPIC_API_KEY": "k", "AWS_CA_BUNDLE": "/etc/ca.pem"})
    assert not others.needs_litellm("openai/gpt-4o-mini")
    assert others.plan("openai/gpt-4o-mini").reason == "OPENAI_API_KEY not set"
    assert others.needs_litellm("anthropic/claude-sonnet-4-5") and others.needs_litellm("bedrock/x")
    # Forced local: a key changes nothing, the table alone knows the provider.
    forced = ModelResolver(None, {"OPENAI_API_KEY": "k"}, force_local=True)
    assert not forced.needs_litellm("openai/gpt-4o-mini")
    assert forced.plan("openai/gpt-4o-mini").reason == "DEV_SERVER_LOCAL_MODEL_ONLY=true"


def test_the_names_litellm_reads_beyond_the_usual_patterns_are_provider_variables() -> None:
    found = collect_provider_env({"TOGETHER_AI_TOKEN": "t", "USE_LITELLM_PROXY": "true", "HOME": "/root"}, None)
    assert found == {"TOGETHER_AI_TOKEN": "t", "USE_LITELLM_PROXY": "true"}


# -- a process that never needs litellm ------------------------------------------------------

# A fresh interpreter, so what is imported can be observed (the test session imported litellm
# up front). Connections and DNS lookups are refused and recorded at the socket layer.
FRESH_PROCESS = textwrap.dedent(
    """
    import asyncio, json, socket, sys
    attempts = []
    def refuse(*args, **kwargs):
        attempts.append(repr(args[1:2])[:120])
        raise OSError("network disabled by test")
    real_connect = socket.socket.connect
    def connect(self, address):
        if self.family in (socket.AF_INET, socket.AF_INET6):
            return refuse(self, address)
        return real_connect(self, address)
    socket.socket.connect = connect
    socket.getaddrinfo = refuse

    from dev_server.agents.registry import DEFINITIONS, with_models
    from dev_server.kernel.model import ModelRequest
    from dev_server.llm import LiteLLMClient

    def text(events):
        return "".join(getattr(e, "text", "") for e in events)

    async def run():
        report = {}
        client = LiteLLMClient(environ={}, agent_models={a.id: a.model for a in with_models(DEFINITIONS)})
        await client.warm_up()
        report["status"] = client.status()
        request = ModelRequest("openai/gpt-4o-mini", [{"role": "user", "content": "hi"}])
        report["local_text"] = text([e async for e in client.stream(request)])
        embedder = await client.embedder("openai/text-embedding-3-small")
        report["embedder"] = [embedder.answered_by, (await embedder.embed(["hello"])).shape[1]]
        report["litellm_after_local_work"] = "litellm" in sys.modules
        keyed = LiteLLMClient(environ={"OPENAI_API_KEY": "sk-test"},
                              extra_kwargs={"mock_response": "Hello from openai"})
        report["provider_text"] = text([e async for e in keyed.stream(request)])
        report["litellm_after_provider_call"] = "litellm" in sys.modules
        report["status_after"] = client.status()["litellmLoaded"]
        return report

    report = asyncio.run(run())
    print(json.dumps({**report, "attempts": attempts}))
    """
)


def test_local_models_and_the_local_embedder_never_import_litellm_and_a_keyed_model_does() -> None:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and not k.startswith("DEV_SERVER_")}
    result = subprocess.run([sys.executable, "-c", FRESH_PROCESS], cwd=REPO, env=env, capture_output=True, text=True,
                            timeout=180)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    status = report["status"]
    assert status["ready"] is True and status["litellmLoaded"] is False
    assert status["agents"]["chat-agent"] == {"model": "openai/gpt-4o-mini", "answeredBy": "local/openai/gpt-4o-mini",
                                              "local": True, "ready": True, "reason": "OPENAI_API_KEY not set",
                                              "missing": ["OPENAI_API_KEY"]}
    assert report["local_text"].startswith("[local model] ")
    assert report["embedder"] == ["local/all-MiniLM-L6-v2-int8", 384]
    assert report["litellm_after_local_work"] is False
    assert report["provider_text"] == "Hello from openai"  # imported on first use, through litellm
    assert report["litellm_after_provider_call"] is True and report["status_after"] is True
    assert report["attempts"] == []  # litellm read its bundled tiktoken encodings: nothing was downloaded


def test_a_gateway_without_keys_answers_without_litellm(start_server: Any) -> None:
    # Telemetry on, towards a studio port where nothing listens; semantic recall on (the embedder).
    gateway = start_server("gateway", env={"DEV_SERVER_STUDIO_PORT": str(free_port()),
                                           "DEV_SERVER_SEMANTIC_RECALL": "chat-agent"})
    health = wait_models_ready(gateway)
    models = health["models"]
    assert health["status"] == "ok" and models["litellmLoaded"] is False
    assert models["agents"]["chat-agent"]["reason"] == "OPENAI_API_KEY not set"
    assert "chat-agent -> local model (OPENAI_API_KEY not set)" in gateway.output()
    body = {"conversationId": "lazy", "messages": [user_message("u1", "hello")]}
    response = local_http.post(f"{gateway.url}/api/chat", json=body, timeout=60)
    assert response.status_code == 200, response.text
    chunks = [json.loads(line[6:]) for line in response.text.splitlines() if line.startswith("data: {")]
    assert chunks[0]["messageMetadata"]["local"] is True
    assert "".join(c.get("delta", "") for c in chunks if c["type"] == "text-delta").startswith("[local model] ")
    deadline = time.monotonic() + 60
    while (recall := local_http.get(f"{gateway.url}/health",
                                    timeout=5).json()["semanticRecall"]).get("embedder") is None:
        assert time.monotonic() < deadline, recall
        time.sleep(0.1)
    assert recall["embedder"]["local"] is True
    assert local_http.get(f"{gateway.url}/health", timeout=5).json()["models"]["litellmLoaded"] is False
    assert gateway.stop() == 0
