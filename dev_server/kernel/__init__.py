"""The kernel: the vocabulary every feature speaks, at the bottom of the tree.

Threads and messages (``messages``) and the conversions between their UI, stored and model
forms (``convert``); the model port (``model``: requests, streamed events, the client
protocol); the loop's event union (``events``); tools, their context and execution
(``tools``, ``tool_runs``); the processor protocol (``processors``), the ports memory
features are handed (``ports``) and the step loop (``loop``); the errors a client can cause
(``errors``) and what it is told when a stream fails (``stream_errors``); text repair
(``text``), strict JSON text (``json_text``), the clock (``clock``); the marks memory's
prompts and the local model must spell alike (``prompt_marks``).
The kernel imports nothing of the project above it: storage, the memory features, the
agents and the routes all import it, never the other way round.
"""
