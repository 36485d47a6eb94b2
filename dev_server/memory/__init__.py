"""Conversation memory: what is stored (everything) and what a model is fed (a window)."""
