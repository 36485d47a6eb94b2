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
        "models": {"ready": litellm_ready()},
        "telemetry": request.app.state.telemetry.stats() if request.app.state.telemetry else None,
    }
