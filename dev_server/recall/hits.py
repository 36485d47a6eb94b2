"""What a semantic search returns, and why it may not answer: the kernel's search port
(``dev_server.kernel.ports``), which semantic recall and Observational Memory's recall tool
both speak."""

from __future__ import annotations

from dev_server.kernel.ports import SemanticHit, SemanticSearchUnavailable

__all__ = ["SemanticHit", "SemanticSearchUnavailable"]
