"""Agent as tool: a tool that asks another agent a question and returns its answer.

The asked agent runs through the same ``TurnRunner`` as any turn, but without a thread: it
sees only the question, stores nothing (no thread, no message), and its run is a child of
the asking tool's ``tool_call`` span, so the whole exchange is one trace. The runner hands
tools that seam as ``ToolContext.ask_agent`` (in a turn, and on the Studio's execute route);
a context without it makes the tool fail with a clear error.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from dev_server.kernel.tools import Tool, ToolContext

ASK_TIMEOUT_S = 120.0  # a whole turn of the other agent, its own tool calls included


class AskInput(BaseModel):
    question: str = Field(description="The question or task for the agent, self-contained: it sees nothing else",
                          min_length=1, max_length=8000)


def tool_name(agent_id: str) -> str:
    return "ask_" + agent_id.replace("-", "_")


def ask_agent_tool(agent_id: str, description: str) -> Tool:
    async def ask(args: AskInput, context: ToolContext) -> str:
        if context.ask_agent is None:
            raise RuntimeError(f"{tool_name(agent_id)} runs only inside an agent's turn")
        return await context.ask_agent(agent_id, args.question, context.trace_context)

    return Tool(name=tool_name(agent_id), description=description, input_model=AskInput, function=ask,
                timeout_s=ASK_TIMEOUT_S)
