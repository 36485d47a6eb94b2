"""The history window, token tier 1: the thread's last N messages, read from storage.

An input processor of the step loop. It reads the window once, on the turn's first step
(the thread does not change under a turn: the turn holds its lease), and the context keeps
it for the later steps, whose own tool rounds the loop appends after it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dev_server.kernel.processors import StepContext
from dev_server.kernel.convert import to_model_messages
from dev_server.kernel.text import repair_value

if TYPE_CHECKING:
    from dev_server.memory.memory import Memory


class HistoryWindow:
    name = "history"

    def __init__(self, memory: Memory) -> None:
        self.memory = memory

    async def process_step(self, step: StepContext) -> None:
        if step.index > 0 or step.thread is None:
            return
        window = await self.memory.window(step.thread.id, step.input_count)
        step.history = repair_value(to_model_messages(window))
        step.window = window
        step.state[self.name] = {"messages": len(window)}
