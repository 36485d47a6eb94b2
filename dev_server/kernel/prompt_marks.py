"""The marks by which a model reads memory's prompts: text the prompts write and the local
model (``dev_server.llm.local_observer``, ``local_reflector``, ``local_working_memory``) looks for.

Observational Memory's prompts (``dev_server.om.prompting.prompts``, the extractors of
``dev_server.om.options.extractors``) and working memory's system message
(``dev_server.memory.working_document``) are written above the model port; the local model
answers them from below it. What both sides must spell the same way lives here, so that
neither imports the other: the observer's and reflector's identities and headings, the
optional output sections, the compression headings, the extractor's markers, and working
memory's tags and tool name.
"""

from __future__ import annotations

# -- Observational Memory: the observer and the reflector -------------------------------

OBSERVER_IDENTITY = ("You are the memory consciousness of an AI assistant, and you watch its conversations "
                     "so it can remember them.")
REFLECTOR_IDENTITY = ("You are the memory consciousness of an AI assistant, and you are reflecting on "
                      "everything it has observed so far.")

PRIOR_METADATA_HEADING = "## Prior Thread Metadata"
TASK_HEADING = "## Your Task"
HISTORY_HEADING = "## New Message History to Observe"
REFLECT_HEADING = "## OBSERVATIONS TO REFLECT ON"
OBSERVATIONS_EVERY_TIME = "Output <observations> every time."
SKIP_HINTS_NOTE = f"Leave out <current-task> and <suggested-response> this time. {OBSERVATIONS_EVERY_TIME}"
REFLECTION_REQUEST = ("Rewrite these observations into a refined, condensed version. What you write replaces "
                      "them and becomes the assistant's entire memory from now on.")

CURRENT_TASK_SECTION = """<current-task>
What the assistant is working on now, one task or several:
- Primary: the task in progress
- Secondary: other pending work (mark it "waiting for user" when it waits on them)
If the assistant started on something the user did not approve, say that it is off-task.
</current-task>"""

SUGGESTED_RESPONSE_SECTION = """<suggested-response>
A hint for the assistant's next message, for example:
- "I've finished the migration. Here is what changed..."
- "Wait for the user's answer before going on."
- Open src/config.ts again to continue the refactor.
</suggested-response>"""

THREAD_TITLE_SECTION = """<thread-title>
A short noun phrase of two to five words naming this conversation, for a list of conversations:
- "Login bug fix", not "Fixing the login bug" (no verbs or sentences)
- "Dark mode setting", not "User wants a dark mode setting added" (no requests)
- "Release pipeline", not "Work stuff" or "Code review" (nothing vague or generic)
Change it from the prior title only when the topic has clearly moved on.
</thread-title>"""

SHARED_SECTIONS_NOTE = ("These sections belong to the user, not to one conversation: write each of them once, "
                        "after the </observations> block and outside every <thread> block:")

COMPRESSION_HEADINGS: dict[int, str] = {
    1: "## COMPRESSION REQUIRED",
    2: "## AGGRESSIVE COMPRESSION REQUIRED",
    3: "## CRITICAL COMPRESSION REQUIRED",
    4: "## EXTREME COMPRESSION REQUIRED",
}

# -- Observational Memory: a structured extractor's follow-up call ---------------------

EXTRACTOR_IDENTITY = "You extract one structured value from an AI assistant's memory of a conversation."
SCHEMA_OPEN, SCHEMA_CLOSE = "<schema>", "</schema>"
SOURCE_HEADING = "## Source"

# -- working memory's system message and tool ------------------------------------------

INSTRUCTION_HEADER = "WORKING_MEMORY_SYSTEM_INSTRUCTION:"
DATA_OPEN, DATA_CLOSE = "<working_memory_data>", "</working_memory_data>"
TEMPLATE_OPEN, TEMPLATE_CLOSE = "<working_memory_template>", "</working_memory_template>"
TOOL_NAME = "updateWorkingMemory"
EMPTY_DATA = "(nothing stored yet)"
