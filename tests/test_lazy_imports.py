"""A process loads what it uses when it first uses it (issue 31, item 4).

``make dev``'s processes, offline (the local model answers, telemetry on, chat-agent with
Observational Memory), started as processes because the process is the subject: after a
turn each, neither has loaded litellm (``/health`` says so), numpy, onnxruntime or
tokenizers (semantic recall is off), nor a tokenizer for the local model's usage (it is
estimated); only the studio, which stores the spans, has loaded DuckDB. Native libraries
are read from ``/proc/<pid>/maps``, so what a module imported at its top is caught too.
litellm on the first provider call is tests/test_lazy_litellm.py's subject.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from tests.kit.local_http import local_http
from tests.support import user_message, wait_models_ready

# A native library each package loads on import, as it appears in /proc/<pid>/maps.
NATIVE = {"numpy": "_multiarray_umath", "onnxruntime": "onnxruntime_pybind11_state", "tokenizers": "/tokenizers/",
          "tiktoken": "_tiktoken", "duckdb": "_duckdb"}


def loaded(pid: int) -> set[str]:
    maps = Path(f"/proc/{pid}/maps").read_text()
    return {name for name, marker in NATIVE.items() if marker in maps}


def test_started_processes_with_local_models_load_only_what_they_use(start_server: Any) -> None:
    studio = start_server("studio")
    gateway = start_server("gateway", env={"DEV_SERVER_STUDIO_PORT": str(studio.port)})
    for server in (studio, gateway):
        assert wait_models_ready(server)["models"]["litellmLoaded"] is False
    body = {"conversationId": "lazy", "messages": [user_message("u1", "hello")]}
    chat = local_http.post(f"{gateway.url}/api/chat", json=body, timeout=60)
    assert chat.status_code == 200 and chat.text.rstrip().endswith("[DONE]"), chat.text
    turn = local_http.post(f"{studio.url}/api/agents/chat-agent/generate", timeout=60,
                      json={"messages": [{"role": "user", "content": "hello"}],
                            "memory": {"thread": "lazy-studio", "resource": "r"}})
    assert turn.status_code == 200 and turn.json()["text"].startswith("[local model] "), turn.text
    deadline = time.monotonic() + 30  # both runs' spans are in the studio's store (the gateway's sent over OTLP)
    while len(local_http.get(f"{studio.url}/api/observability/traces", timeout=10).json()["spans"]) < 2:
        assert time.monotonic() < deadline
        time.sleep(0.2)

    assert loaded(gateway.process.pid) == set()
    assert loaded(studio.process.pid) == {"duckdb"}
    for server in (studio, gateway):
        assert local_http.get(f"{server.url}/health", timeout=5).json()["models"]["litellmLoaded"] is False
