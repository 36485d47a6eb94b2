from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from app import __version__
from app.llm import litellm_ready

router = APIRouter()


@router.get("/health")
async def health(request: Request) -> dict[str, Any]:
    storage = request.app.state.storage
    settings = request.app.state.settings
    return {
        "status": "ok" if storage.default.is_open else "unavailable",
        "role": request.app.state.role,
        "version": __version__,
        "dataDir": str(settings.resolved_data_dir),
        "stores": storage.health(),
        "models": _models(request.app.state.runner.llm),
        "telemetry": request.app.state.telemetry.stats() if request.app.state.telemetry else None,
    }


def _models(llm: Any) -> dict[str, Any]:
    """Whether the model layer is warm, and who answers each agent (and why)."""
    status = getattr(llm, "status", None)
    return status() if status is not None else {"ready": litellm_ready()}
