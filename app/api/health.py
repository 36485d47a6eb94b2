"""``GET /health`` on both processes: public (no credential needed), cheap, always JSON.

The server accepts connections only once its stores are open and its models are warm (the
lifespan does both before serving), so a 200 here means a chat is answered at once.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from app import __version__
from app.api.deps import ServicesDep
from app.llm import litellm_ready

router = APIRouter()


@router.get("/health")
async def health(services: ServicesDep) -> dict[str, Any]:
    storage = services.storage
    return {
        "status": "ok" if storage.default.is_open else "unavailable",
        "role": services.role,
        "version": __version__,
        "dataDir": str(services.settings.resolved_data_dir),
        "stores": storage.health(),
        "models": _models(services.runner.llm),
        "telemetry": services.telemetry.stats() if services.telemetry else None,
    }


def _models(llm: Any) -> dict[str, Any]:
    """Whether the model layer is warm, and who answers each agent (and why)."""
    status = getattr(llm, "status", None)
    return status() if status is not None else {"ready": litellm_ready()}
