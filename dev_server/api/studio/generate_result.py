"""What ``/generate`` reports of a run's steps, in the shapes Mastra's ``generate`` returns.

Each step (``LLMStepResult``) has its text, ``toolCalls`` / ``toolResults`` as chunks
(``{type: "tool-call" | "tool-result", runId, from: "AGENT", payload}``: client-js reads
``toolCall.payload.toolName`` / ``.args`` / ``.toolCallId`` to run client tools), its finish
reason and usage; the run's ``toolCalls`` / ``toolResults`` are all of them (Mastra's top
level), and ``response.messages`` the model messages of the run (an assistant message per
step: text and ``tool-call`` parts; a ``tool`` message of its ``tool-result`` parts), which
client-js sends back with a client tool's output.
"""

from __future__ import annotations

from typing import Any

from dev_server.kernel.events import StepFinish, ToolCallEvent, ToolErrorEvent, ToolResultEvent
from dev_server.streaming.mastra_chunks import chunk, usage_payload


def generate_result(run_id: str, steps: list[StepFinish]) -> dict[str, Any]:
    """``steps``, ``toolCalls`` and ``toolResults`` of the response."""
    described = [_step(run_id, step) for step in steps]
    return {"steps": described,
            "toolCalls": [call for step in described for call in step["toolCalls"]],
            "toolResults": [result for step in described for result in step["toolResults"]]}


def response_messages(steps: list[StepFinish]) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for step in steps:
        content: list[dict[str, Any]] = [{"type": "text", "text": step.text}] if step.text else []
        content += [{"type": "tool-call", "toolCallId": c.call_id, "toolName": c.name, "input": c.input}
                    for c in step.tool_calls]
        if content:
            messages.append({"role": "assistant", "content": content})
        if step.tool_results:
            messages.append({"role": "tool", "content": [
                {"type": "tool-result", "toolCallId": r.call_id, "toolName": r.name, "output": _output(r)}
                for r in step.tool_results]})
    return messages


def _step(run_id: str, step: StepFinish) -> dict[str, Any]:
    calls = [chunk("tool-call", run_id, _call(c)) for c in step.tool_calls]
    results = [chunk("tool-result", run_id, _result(r)) for r in step.tool_results]
    return {"stepType": "initial" if step.index == 0 else "tool-result", "text": step.text,
            "toolCalls": calls, "toolResults": results, "dynamicToolCalls": [], "dynamicToolResults": [],
            "staticToolCalls": calls, "staticToolResults": results, "files": [], "sources": [], "reasoning": [],
            "content": [], "finishReason": step.reason, "usage": usage_payload(step.usage), "warnings": [],
            "request": {}, "response": {}}


def _call(call: ToolCallEvent) -> dict[str, Any]:
    return {"toolCallId": call.call_id, "toolName": call.name, "args": call.input}


def _result(result: ToolResultEvent | ToolErrorEvent) -> dict[str, Any]:
    payload = {"toolCallId": result.call_id, "toolName": result.name, "args": result.input}
    if isinstance(result, ToolErrorEvent):
        return {**payload, "result": {"error": result.error}, "isError": True}
    return {**payload, "result": result.output}


def _output(result: ToolResultEvent | ToolErrorEvent) -> dict[str, Any]:
    if isinstance(result, ToolErrorEvent):
        return {"type": "error-text", "value": result.error}
    return {"type": "json", "value": result.output}
