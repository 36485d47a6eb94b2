from dev_server.agents.agent_tools import ask_agent_tool
from dev_server.agents.definition import AgentDefinition

definition = AgentDefinition(
    id="orchestrator-agent",
    name="Orchestrator Agent",
    description="Routes work between agents; keeps no memory of its own.",
    instructions=("You route each request to the specialist that should handle it: ask_chat_agent for general "
                  "questions and arithmetic, ask_docs_agent for software documentation. Ask with a self-contained "
                  "question, then answer the user in one or two sentences from what the specialist said."),
    memory=None,
    tools=(
        ask_agent_tool("chat-agent", "Ask the chat agent (a general assistant with a calculator) a question."),
        ask_agent_tool("docs-agent", "Ask the docs agent a question about software documentation."),
    ),
)
