"""Working memory as a processor of the step loop (token tier 3).

Each step it adds one system message (the memory's instructions, template and current
document: ``working_document.instruction``) and the ``updateWorkingMemory`` tool. The
document is read from storage once per turn, on the first step, into the turn's object
(``WorkingMemoryTurn``); the tool writes through the memory's document (the kernel's
``WorkingMemoryDocument`` port) and then updates the turn's copy, so a later step
sees the new document without reading it again, and a step without an update reuses the
message it rendered before (a step costs a list append and a dict insert).

The tool's input is ``{"memory": "<whole Markdown document>"}`` or, for a schema'd memory,
``{"memory": {<the changed keys>}}`` (merged; ``working_document``). An update that does
not fit raises ``WorkingMemoryInvalid``: the loop reports it as the tool's error, which
the model sees, and the stored document is unchanged.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from dev_server.kernel.ports import WorkingMemoryDocument
from dev_server.kernel.processors import StepContext, TurnProcessor
from dev_server.kernel.tools import Tool, ToolContext
from dev_server.memory.working_document import MAX_DOCUMENT_CHARS, TOOL_NAME, WorkingMemoryOptions, instruction

if TYPE_CHECKING:
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


class WorkingMemory:
    name = "working-memory"

    def __init__(self, document: WorkingMemoryDocument, options: WorkingMemoryOptions,
                 agent_managed: bool = True) -> None:
        self.document = document
        self.options = options
        self.agent_managed = agent_managed  # False: OM keeps it (manageWorkingMemory), no tool
        self.input_model = update_model(options)

    def start_turn(self, step: StepContext) -> WorkingMemoryTurn:
        return WorkingMemoryTurn(self)


class WorkingMemoryTurn(TurnProcessor):
    """The turn's copy of the document (None until the first step read it), the system
    message rendered from it (None: to be rendered again) and the turn's update tool."""

    name = "working-memory"

    def __init__(self, processor: WorkingMemory) -> None:
        self.processor = processor
        self.read = False
        self.document: str | None = None
        self.message: dict[str, Any] | None = None
        self.tool: Tool | None = None

    async def before_step(self, step: StepContext) -> None:
        if step.thread is None:
            return
        processor = self.processor
        if not self.read:
            self.document = await processor.document.read(step.thread, step.resource_id)
            self.read = True
            self.tool = self._tool(step.thread, step.resource_id)
        if self.message is None:
            self.message = {"role": "system",
                            "content": instruction(processor.options, self.document, processor.agent_managed)}
        step.system.append(self.message)
        if processor.agent_managed:
            assert self.tool is not None
            step.add_tool(self.tool)

    def _tool(self, thread: Thread, resource_id: str | None) -> Tool:
        processor = self.processor

        async def update(args: BaseModel, _: ToolContext) -> dict[str, Any]:
            self.document = await processor.document.apply_update(args.memory, thread, resource_id)
            self.message = None  # rendered again on the next step
            return {"success": True}

        kind = "JSON object" if processor.options.schema is not None else "Markdown document"
        return Tool(name=TOOL_NAME, input_model=processor.input_model, function=update,
                    description=f"Update the working memory ({kind}) with new or changed information about "
                                "the user or the conversation.")
