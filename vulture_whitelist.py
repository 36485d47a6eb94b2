"""What vulture (``make lint``) reports as unused in dev_server and stays, each with why.

vulture reads dev_server alone, so what only the tests use looks unused to it, and so does
what a library calls or reads by name. Route handlers (FastAPI's decorators), pydantic
validators and ``model_config`` are ignored by ``[tool.vulture]`` in pyproject.toml instead.
This file is only parsed by vulture, never imported: each line "uses" a name.
"""
# ruff: noqa
# fmt: off

# Read by the tests (the production code has no use for them).
ui_to_model         # dev_server/kernel/convert.py: tests/test_llm_multimodal.py checks it agrees with stored_to_model
_.tool_names        # dev_server/llm/scripted.py: what a test asserts about a scripted call
_.last_user_text    # dev_server/llm/scripted.py: idem
_.requests_for      # dev_server/llm/scripted.py: idem
_.get_record        # dev_server/om/manual.py: the standalone OM API's read of a record (tests/test_om_manual.py)
_.request_context   # dev_server/om/options/extractors.py: Mastra's requestContext in an extractor's run context, read by user functions
VectorRow           # dev_server/storage/message_vectors.py: tests/test_semantic_recall.py builds rows with it
_.applied_migrations  # dev_server/storage/libsql.py, remote.py: tests/test_migrations.py
ping                # dev_server/storage/remote.py: tests/sqld.py waits for a libsql server with it
_.apply_working_memory_update  # dev_server/memory/memory.py: tests/test_working_memory.py races updates through it
ObservationalMemory  # dev_server/om/manual.py: the standalone OM API the README documents (tests/test_om_manual.py)
ManualClock         # dev_server/kernel/clock.py: the clock a test hands create_app to run a conversation at fixed times
ShiftedClock        # dev_server/kernel/clock.py: system time plus an offset a test advances (time keeps running)
_.advance           # dev_server/kernel/clock.py: both test clocks move forward with it

# Read or called by a library.
__getattr__          # dev_server/__init__.py: Python calls it for the public names (Agent, Memory, tool, ...: PEP 562)
_.limit_concurrency  # dev_server/connection_limits.py: uvicorn's protocol reads it
_.keep_alive         # dev_server/connection_limits.py: uvicorn's request cycle reads it
_.row_factory        # dev_server/storage/libsql.py: sqlite3 reads it
_.graph_optimization_level  # dev_server/llm/local_embedder.py: onnxruntime's SessionOptions
_.log_severity_level        # idem
_.intra_op_num_threads      # idem
_.suppress_debug_info  # dev_server/llm/offline.py: litellm's module settings
_.set_verbose          # idem
_.success_callback     # idem
_.failure_callback     # idem
_.input_callback       # idem
_.on_start           # dev_server/observability/export_queue.py: OpenTelemetry's SpanProcessor interface
parent_context       # idem (a parameter of on_start)
_.on_end             # idem
_.force_flush        # idem, and LogRecordProcessor's
_.on_emit            # idem: LogRecordProcessor's
_.join_all           # dev_server/workers.py: uvicorn's Multiprocess supervisor calls it when it stops
_.seek               # dev_server/om/tokens/attachments.py: imagesize reads the image header through them
_.tell               # idem

# Part of a shape the module promises.
_.lastrowid          # dev_server/storage/hrana.py: the sqlite3 cursor surface the stores' SQL runs on
_.acquired_at        # dev_server/storage/leases.py: Lease mirrors the thread_leases row
_.expires_at         # idem
_.readOnly           # dev_server/api/studio/agent_input.py: a request field Mastra's Studio sends, validated
_.startExclusive     # dev_server/api/studio/metrics.py: idem
_.endExclusive       # idem
_.requestContext     # dev_server/api/studio/tools.py: idem

