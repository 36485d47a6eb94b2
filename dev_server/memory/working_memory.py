"""Working memory as an input processor of the step loop (token tier 3).

Each step it adds one system message (the memory's instructions, template and current
document: ``working_document.instruction``) and the ``updateWorkingMemory`` tool. The
document is read from storage once per turn, on the first step; the tool writes through
``Memory.update_working_memory`` and then updates the turn's cached copy, so a later step
sees the new document without reading it again, and a step without an update reuses the
message it rendered before (a step costs a list append and a dict insert).

The tool's input is ``{"memory": "<whole Markdown document>"}`` or, for a schema'd memory,
``{"memory": {<the changed keys>}}`` (merged; ``working_document``). An update that does
not fit raises ``WorkingMemoryInvalid``: the loop reports it as the tool's error, which
the model sees, and the stored document is unchanged.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from dev_server.kernel.processors import StepContext
from dev_server.kernel.tools import Tool, ToolContext
from dev_server.memory.working_document import MAX_DOCUMENT_CHARS, TOOL_NAME, WorkingMemoryOptions, instruction

if TYPE_CHECKING:
    from dev_server.memory.memory import Memory
    from dev_server.kernel.messages import Thread


class MarkdownUpdate(BaseModel):
    memory: str = Field(max_length=MAX_DOCUMENT_CHARS,
                        description="The complete working memory document, in Markdown; it replaces the stored one")


def update_model(options: WorkingMemoryOptions) -> type[BaseModel]:
    if options.schema is None:
        return MarkdownUpdate
    return _json_update_model(json.dumps(options.schema, sort_keys=True))


@lru_cache(maxsize=64)
def _json_update_model(schema_json: str) -> type[BaseModel]:
    """The tool input of a schema'd memory: ``memory`` is an object shaped like the schema,
    every key optional (only what changes is sent; null removes a key)."""
    schema = json.loads(schema_json)
    shown = {key: value for key, value in schema.items() if key not in ("required", "$schema")}

    def show_schema(model_schema: dict[str, Any]) -> None:
        model_schema["properties"]["memory"] = {
            **shown, "description": "The keys of the working memory to change: objects are merged, "
                                    "null removes a key, arrays replace the stored array"}

    class JsonUpdate(BaseModel):
        model_config = ConfigDict(json_schema_extra=show_schema)
        memory: dict[str, Any]

    return JsonUpdate


@dataclass
class _TurnDocument:
    """The turn's copy of the document, the system message rendered from it (None: to be
    rendered again) and the turn's update tool."""

    document: str | None
    message: dict[str, Any] | None = None
    tool: Tool | None = None


class WorkingMemory:
    name = "working-memory"

    def __init__(self, memory: Memory, options: WorkingMemoryOptions, agent_managed: bool = True) -> None:
        self.memory = memory
        self.options = options
        self.agent_managed = agent_managed  # False: OM keeps it (manageWorkingMemory), no tool
        self.input_model = update_model(options)

    async def process_step(self, step: StepContext) -> None:
        if step.thread is None:
            return
        copy: _TurnDocument | None = step.state.get(self.name)
        if copy is None:
            copy = step.state[self.name] = _TurnDocument(await self.memory.get_working_memory(step.thread,
                                                                                             step.resource_id))
            copy.tool = self._tool(step.thread, step.resource_id, copy)
        if copy.message is None:
            copy.message = {"role": "system", "content": instruction(self.options, copy.document, self.agent_managed)}
        step.system.append(copy.message)
        if self.agent_managed:
            step.add_tool(copy.tool)

    def _tool(self, thread: Thread, resource_id: str | None, copy: _TurnDocument) -> Tool:
        async def update(args: BaseModel, _: ToolContext) -> dict[str, Any]:
            copy.document = await self.memory.apply_working_memory_update(args.memory, thread, resource_id)
            copy.message = None  # rendered again on the next step
            return {"success": True}

        kind = "JSON object" if self.options.schema is not None else "Markdown document"
        return Tool(name=TOOL_NAME, input_model=self.input_model, function=update,
                    description=f"Update the working memory ({kind}) with new or changed information about "
                                "the user or the conversation.")
