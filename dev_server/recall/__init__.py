"""Semantic recall: embeddings of stored messages and the searches over them.

``index`` keeps the vectors beside the messages (default domain, ``message_vectors``),
``indexer`` fills it in the lifespan's background work, ``search`` answers a query with
the nearest messages of a thread or a resource, and ``processor`` is the ``semanticRecall``
processor of the step loop. It meets the rest of memory only through the kernel's ports
(``dev_server.kernel.ports``).
"""
