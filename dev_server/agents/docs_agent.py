from dev_server.agents.definition import AgentDefinition
from dev_server.memory.options import MemoryOptions

definition = AgentDefinition(
    id="docs-agent",
    name="Docs Agent",
    description="Answers questions about documentation, with a short conversation memory.",
    instructions="You answer questions about software documentation. Quote the relevant part when you can.",
    memory=lambda: MemoryOptions(last_messages=10),
)
