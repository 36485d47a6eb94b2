"""Streams: chunk values built in ``ui_chunks`` (AI SDK) and encoded only at the edge (``sse``)."""
