"""An agent's processors, in the order the loop calls them, from its memory's options.

The history window (or Observational Memory, which takes its place), then semantic recall,
then working memory shape each step; then the processors that only see the finished
reply: OM's token estimates and ``bufferOnIdle``, and titles. Each feature gets only the
ports it needs (``dev_server.kernel.ports``), never another feature or the memory itself.
"""

from __future__ import annotations

from dev_server.kernel.ports import BackgroundJobs, SemanticSearch, WorkingMemoryDocument
from dev_server.kernel.processors import Processor
from dev_server.memory.history import HistoryWindow
from dev_server.memory.om_wiring import OMParts
from dev_server.memory.options import MemoryOptions
from dev_server.memory.titles import TitleGenerator
from dev_server.memory.working_memory import WorkingMemory
from dev_server.om.processor import BufferOnIdle, ObservationalMemoryStep, TokenEstimates
from dev_server.recall.processor import SemanticRecallStep
from dev_server.storage.conversations import ConversationStore


def assemble(options: MemoryOptions, store: ConversationStore, *, om: OMParts | None, search: SemanticSearch,
             working: WorkingMemoryDocument, background: BackgroundJobs | None) -> tuple[Processor, ...]:
    """``om``: the memory's Observational Memory when it is on; ``working``: its working
    memory document (used when working memory is on); ``background``: where titles queue."""
    processors: list[Processor] = [ObservationalMemoryStep(store, search, om.engine, om.buffering, om.backlog) if om
                                   else HistoryWindow(store, options.window)]
    if options.recall is not None:
        processors.append(SemanticRecallStep(store, search, options.recall))
    if options.working is not None:
        processors.append(WorkingMemory(working, options.working, options.working_memory_roles()[0]))
    if om is not None:
        processors.append(TokenEstimates())
        if om.engine.options.buffer_on_idle:
            processors.append(BufferOnIdle(store, om.engine, om.buffering, om.backlog))
    if options.generate_title and background is not None:
        processors.append(TitleGenerator(store, background))
    return tuple(processors)
