"""Tool routes of the Mastra API (Mastra's Studio REST API: agents): list, detail, execute.

``GET /api/tools`` lists the server tools of every agent by id (the first agent listing an
id wins) as Mastra's ``ToolInfo`` (``dev_server.api.studio.agents.tool_info``: the input schema as
superjson-wrapped JSON Schema text, which client-js's ``getTools``/``getTool`` return as
is); the agent routes (``/api/agents/{agentId}/tools/{toolId}``) look in that agent's tools,
client tools included. ``POST .../execute`` takes ``{data, requestContext?}``: input that
does not fit the schema is a 400 with the validation message, a client tool is a 400 (the
client runs it), and the result is the tool's output as is, as Mastra returns it. A tool
that raises or times out on the given input is a 422 ``TOOL_FAILED`` with its message (the
input decides it, so it is the client's to fix: never a 500). Each execution is a ``tool_call`` span
in a trace of its own; an agent as tool (``ask_chat_agent``) runs its agent under that span.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter
from opentelemetry import trace
from opentelemetry.context import Context
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from dev_server.agents.registry import AgentRegistry, RegisteredAgent
from dev_server.agents.runner import TurnRunner, new_id
from dev_server.api.deps import AgentDep, AgentsDep, ForcedResource, RunnerDep
from dev_server.api.studio.agents import tool_info
from dev_server.kernel.errors import ApiError, BadRequest, NotFound
from dev_server.kernel.tools import Tool, ToolContext, execute, validation_message
from dev_server.observability import spans

router = APIRouter(prefix="/api", tags=["tools"])


class ToolExecuteBody(BaseModel):
    """client-js's ``tool.execute`` / ``agent.executeTool`` body."""

    model_config = ConfigDict(extra="ignore")

    data: Any = Field(None, description="The tool's input, checked against its input schema")
    requestContext: dict[str, Any] | None = None


def server_tools(agents: AgentRegistry) -> dict[str, tuple[RegisteredAgent, Tool]]:
    found: dict[str, tuple[RegisteredAgent, Tool]] = {}
    for agent in agents:
        for tool in agent.definition.tools:
            if not tool.client:
                found.setdefault(tool.name, (agent, tool))
    return found


@router.get("/tools")
async def list_tools(agents: AgentsDep) -> dict[str, Any]:
    return {name: tool_info(tool) for name, (_, tool) in server_tools(agents).items()}


@router.get("/tools/{tool_id}")
async def tool_detail(tool_id: str, agents: AgentsDep) -> dict[str, Any]:
    return tool_info(_server_tool(agents, tool_id)[1])


@router.post("/tools/{tool_id}/execute")
async def execute_tool(tool_id: str, body: ToolExecuteBody, agents: AgentsDep, runner: RunnerDep,
                       forced: ForcedResource, runId: str | None = None) -> Any:
    agent, tool = _server_tool(agents, tool_id)
    return await _execute(runner, agent, tool, body.data, forced, runId)


@router.get("/agents/{agent_id}/tools/{tool_id}")
async def agent_tool_detail(tool_id: str, agent: AgentDep) -> dict[str, Any]:
    return tool_info(_agent_tool(agent, tool_id))


@router.post("/agents/{agent_id}/tools/{tool_id}/execute")
async def execute_agent_tool(tool_id: str, body: ToolExecuteBody, agent: AgentDep, runner: RunnerDep,
                             forced: ForcedResource) -> Any:
    return await _execute(runner, agent, _agent_tool(agent, tool_id), body.data, forced, None)


def _server_tool(agents: AgentRegistry, tool_id: str) -> tuple[RegisteredAgent, Tool]:
    found = server_tools(agents).get(tool_id)
    if found is None:
        raise NotFound(f"Tool with id {tool_id} not found")
    return found


def _agent_tool(agent: RegisteredAgent, tool_id: str) -> Tool:
    for tool in agent.definition.tools:
        if tool.name == tool_id:
            return tool
    raise NotFound(f"Tool with id {tool_id} not found for agent {agent.id}")


async def _execute(runner: TurnRunner, agent: RegisteredAgent, tool: Tool, data: Any, resource: str | None,
                   run_id: str | None) -> Any:
    if tool.client:
        raise BadRequest(f"{tool.name} is a client tool: the client runs it, not the server")
    try:
        tool.validate(data if data is not None else {})
    except ValidationError as exc:
        raise BadRequest(validation_message(tool.name, exc),
                         [{"field": "data." + ".".join(map(str, e["loc"])) if e["loc"] else "data", "message": e["msg"]}
                          for e in exc.errors()]) from None
    run_id = run_id or new_id()
    call_id = new_id("call_")
    ids = spans.identity(agent_id=agent.id, agent_name=agent.definition.name, run_id=run_id, thread_id=None,
                         resource_id=resource)
    span = spans.start(runner.tracer, f"tool: '{tool.name}'", "tool_call", ids, parent=Context(), input=data,
                       attributes={"toolId": tool.name, "toolCallId": call_id, "source": "execute route"})
    context = ToolContext(call_id=call_id, agent_id=agent.id, run_id=run_id, resource_id=resource,
                          trace_context=trace.set_span_in_context(span),
                          ask_agent=runner.ask if runner.agents is not None else None)  # agent as tool
    outcome = await execute({tool.name: tool}, tool.name, json.dumps(data if data is not None else {}, default=str),
                            context)
    if outcome.error is not None:
        spans.finish(span, error=ApiError(outcome.error), error_kind="ToolError")
        raise ApiError(outcome.error, status=422, code="TOOL_FAILED")
    spans.finish(span, output=outcome.output)
    return outcome.output
