"""Streams: a turn's events in, chunks out (``ui_chunks``: AI SDK; ``mastra_chunks``: Mastra), encoded
only at the edge, in frames and a response both processes share (``sse``)."""
