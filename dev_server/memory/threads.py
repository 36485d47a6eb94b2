"""Which thread a turn goes on: an agent's threads inside their resource.

A thread belongs to one resource (a user); a turn names both, and goes on only in a thread
of that resource. The Studio continues a gateway conversation with ``resource = <agent
id>``: that names the agent's own threads in its own resource (``ai-chat``) too, as the
Studio's lists do, and the turn then goes on in the thread's own resource.
"""

from __future__ import annotations

from dev_server.kernel.messages import Thread
from dev_server.storage.conversations import ConversationStore


class ThreadNotOwned(Exception):
    """The thread exists in another resource; callers answer 404 and reveal nothing."""


class AgentThreads:
    """The threads of one agent (``agent_id``, whose gateway conversations live in
    ``agent_resource``) in the conversation store."""

    def __init__(self, store: ConversationStore, agent_id: str | None, agent_resource: str | None) -> None:
        self.store = store
        self.agent_id = agent_id
        self.agent_resource = agent_resource

    async def open(self, thread_id: str, resource_id: str) -> Thread:
        """The thread, if it is in ``resource_id``; a new one (written by the turn's record,
        in its transaction) if it does not exist; ``ThreadNotOwned`` otherwise."""
        thread = await self.store.get_thread(thread_id)
        if thread is None:
            return Thread(thread_id, resource_id, agent_id=self.agent_id)
        alias = resource_id == self.agent_id and (thread.agent_id, thread.resource_id) == (
            self.agent_id, self.agent_resource)
        if thread.resource_id != resource_id and not alias:
            raise ThreadNotOwned(thread_id)
        return thread

    async def ensure(self, thread_id: str, resource_id: str) -> Thread:
        """``open``, and the thread written now if it is new: for a run accepted now and
        started later (the Studio's send-message re-reads the thread at once)."""
        thread = await self.open(thread_id, resource_id)
        if not thread.created_at:
            thread = await self.store.ensure_thread(thread.id, thread.resource_id, agent_id=self.agent_id)
            if thread.resource_id != resource_id:  # created elsewhere meanwhile
                return await self.open(thread_id, resource_id)
        return thread
