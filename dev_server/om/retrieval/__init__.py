"""Retrieval mode: the ``recall`` tool over observed messages, and what the actor is told about it."""
