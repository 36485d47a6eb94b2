"""Who may see what on the studio routes.

With authentication on, every route works inside the principal's resource (``user:<id>``)
whatever the client asks for; a thread of another resource is "Thread not found", and a
list without a resource never shows other users' threads (docs/architecture.md#decisions, the published Mastra
advisory). With it off, a client may name any resource, and the resource it names is the
one stored (Mastra's semantics).

The Studio names its resource after the agent (``resourceId = agentId``), while the gateway
files an agent's conversations under the agent's configured resource (``ai-chat``) and
records the agent on each thread. So a request whose resource is an agent's id sees the
threads of that literal resource *and* that agent's own threads in its configured
resource: the Studio lists and opens the frontend's conversations, and one agent's
sidebar never shows another agent's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request

from dev_server.agents.registry import AgentRegistry, RegisteredAgent
from dev_server.api.deps import forced_resource_of, query_of, services_of
from dev_server.api.query import Query
from dev_server.kernel.errors import NotFound
from dev_server.kernel.messages import Thread


@dataclass(frozen=True)
class Scope:
    """The threads a request may see: those of ``resource`` (every thread when None) and,
    with ``alias = (agent id, agent resource)``, that agent's threads in its resource."""

    resource: str | None
    alias: tuple[str, str] | None = None

    def admits(self, thread: Thread | None) -> bool:
        if thread is None:
            return False
        if self.resource is None or thread.resource_id == self.resource:
            return True
        return self.alias is not None and (thread.agent_id, thread.resource_id) == self.alias

    def visible(self, thread: Thread | None) -> Thread:
        """The thread, if this scope may see it; otherwise "Thread not found"."""
        if not self.admits(thread):
            raise NotFound("Thread not found")
        return thread


def scope_for(forced: str | None, agent: RegisteredAgent | None, requested: str | None) -> Scope:
    if forced is not None:
        return Scope(forced)
    if requested is not None and agent is not None and requested == agent.id \
            and agent.definition.resource != agent.id:
        return Scope(requested, (agent.id, agent.definition.resource))
    return Scope(requested)


def _optional_agent(query: Query, agents: AgentRegistry) -> RegisteredAgent | None:
    agent_id = query.str("agentId")
    return agents.get(agent_id) if agent_id else None


# The agent and scope dependencies read the query, the agents and the principal from the
# request themselves, not through ``MastraQuery``, ``AgentsDep`` and ``ForcedResource``:
# FastAPI resolves every sub-dependency on every request, and dependency resolution was a
# fifth of a thread creation's main-thread CPU.
async def get_optional_agent(request: Request) -> RegisteredAgent | None:
    """The agent named by the ``agentId`` query parameter, if any and known."""
    return _optional_agent(query_of(request), services_of(request).agents)


async def get_query_agent(request: Request) -> RegisteredAgent:
    """The agent named by the ``agentId`` query parameter, or a 404."""
    agent_id = query_of(request).str("agentId") or ""
    agent = services_of(request).agents.get(agent_id)
    if agent is None:
        raise NotFound(f"Agent with id {agent_id} not found")
    return agent


OptionalAgent = Annotated[RegisteredAgent | None, Depends(get_optional_agent)]
QueryAgent = Annotated[RegisteredAgent, Depends(get_query_agent)]


async def get_scope(request: Request) -> Scope:
    """The scope of a memory request: the forced resource, or ``resourceId`` as given (an
    agent's id, with or without ``agentId``, also reaches that agent's own threads)."""
    query, agents = query_of(request), services_of(request).agents
    requested = query.str("resourceId", aliases=("resourceid",))
    agent = _optional_agent(query, agents)
    if agent is None and requested is not None:
        agent = agents.get(requested)
    return scope_for(forced_resource_of(request), agent, requested)


ScopeDep = Annotated[Scope, Depends(get_scope)]


def effective_resource(forced: str | None, agent: RegisteredAgent | None, requested: str | None) -> str | None:
    """The resource a write goes to: the forced one, else exactly what the client gave."""
    return forced if forced is not None else requested


def visible(thread: Thread | None, resource: str | None) -> Thread:
    """The thread, if it exists and (when a resource is in force) belongs to it."""
    return Scope(resource).visible(thread)
