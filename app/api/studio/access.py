"""Who may see what on the studio routes.

With authentication on, every route works inside the principal's resource (``user:<id>``)
whatever the client asks for; a thread of another resource is "Thread not found", and a
list without a resource never shows other users' threads (DESIGN.md, the published Mastra
advisory). With it off, a client may name any resource.

The Studio names its resource after the agent (resourceId = agentId), while the gateway
files an agent's conversations under the agent's configured resource (``ai-chat``): the
agent id is therefore read as an alias of that resource, so the Studio lists and opens
the conversations the frontend had.
"""

from __future__ import annotations

from starlette.requests import Request

from app.agents.registry import RegisteredAgent
from app.auth import resource_for
from app.errors import NotFound
from app.storage.conversations import Thread


async def forced_resource(request: Request) -> str | None:
    authenticator = request.app.state.authenticator
    return resource_for(await authenticator(request)) if authenticator else None


def agent_or_404(request: Request, agent_id: str) -> RegisteredAgent:
    agent = request.app.state.agents.get(agent_id)
    if agent is None:
        raise NotFound(f"Agent with id {agent_id} not found")
    return agent


def optional_agent(request: Request, agent_id: str | None) -> RegisteredAgent | None:
    return request.app.state.agents.get(agent_id) if agent_id else None


def effective_resource(forced: str | None, agent: RegisteredAgent | None, requested: str | None) -> str | None:
    if forced is not None:
        return forced
    if requested is not None and agent is not None and requested == agent.id:
        return agent.definition.resource
    return requested


def visible(thread: Thread | None, resource: str | None) -> Thread:
    """The thread, if it exists and (when a resource is in force) belongs to it."""
    if thread is None or (resource is not None and thread.resource_id != resource):
        raise NotFound("Thread not found")
    return thread
