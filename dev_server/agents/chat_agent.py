from dev_server.agents.calculator import calculator
from dev_server.agents.definition import AgentDefinition
from dev_server.kernel.tools import get_user_location
from dev_server.memory.options import MemoryOptions

definition = AgentDefinition(
    id="chat-agent",
    name="Chat Agent",
    description="A general assistant that remembers the conversation.",
    instructions="You are a helpful assistant. Answer briefly and use what the user told you earlier.",
    memory=lambda: MemoryOptions(last_messages=10, generate_title=True, observational_memory=True),
    tools=(calculator, get_user_location),
)
