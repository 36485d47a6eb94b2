from app.agents.definition import AgentDefinition

definition = AgentDefinition(
    id="orchestrator-agent",
    name="Orchestrator Agent",
    description="Routes work between agents; keeps no memory of its own.",
    instructions="You decide which specialist should handle a request and say so in one sentence.",
    model="openai/gpt-4o-mini",
    memory=None,
)
