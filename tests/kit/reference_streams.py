"""What the AI SDK's own server and Mastra's own agent loop stream for a scripted model
(``tests/js/reference_streams.mjs``), and the shapes our streams are compared with them in.

The cases and the scripts that make our servers do the same:

* ``midStep``: the text "Hel", then the provider fails (``MID_STEP``);
* ``betweenSteps``: a ``calculator`` call that runs, then the next model call is refused at
  once (``BETWEEN_STEPS``);
* ``clientTool`` (Mastra only): a call of ``getUserLocation``, a tool with no server function.

A shape keeps what the protocols decide and drops what differs by design: ``data-*`` chunks
(our memory's), and repeats of one chunk type in a row (a provider streams text and tool
arguments in as many deltas as it likes). A finish carries its reason, a Mastra
``step-finish``/``finish`` its ``stepResult``.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from dev_server.llm.scripted import Call, Reply
from tests.support import run_node

MID_STEP = [Reply(["Hel"], error="provider")]
BETWEEN_STEPS = [Reply(tool_calls=[Call("calculator", {"expression": "1+1"})]), Reply(error="provider")]


@cache
def reference_streams() -> dict[str, Any]:
    """``{"ai": {case: [chunk | "[DONE]"]}, "mastra": {case: [chunk]}, "versions"}``, made once."""
    return run_node("reference_streams.mjs", {}, timeout=120)


def _collapsed(labels: list[str]) -> list[str]:
    return [label for i, label in enumerate(labels) if i == 0 or labels[i - 1] != label]


def ui_shape(chunks: list[dict[str, Any] | str]) -> list[str]:
    labels = []
    for chunk in chunks:
        if isinstance(chunk, str):
            labels.append(chunk)
        elif not chunk["type"].startswith("data-"):
            labels.append(f"finish:{chunk.get('finishReason')}" if chunk["type"] == "finish" else chunk["type"])
    return _collapsed(labels)


def mastra_shape(chunks: list[dict[str, Any]]) -> list[str]:
    labels = []
    for chunk in chunks:
        if chunk["type"].startswith("data-"):
            continue
        result = (chunk.get("payload") or {}).get("stepResult")
        labels.append(f"{chunk['type']}:{result['reason']}:{str(result['isContinued']).lower()}"
                      if result is not None else chunk["type"])
    return _collapsed(labels)
