"""Routes the Studio shell calls on every page (Mastra's Studio REST API: Studio shell, other shell routes).

Most are features this server does not have (workflows, MCP, voice, ...): they answer the
valid empty body Mastra's own server gives, because a 404 here means an error screen or a
refetch storm in the Studio. ``system/packages`` advertises what we do have.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from dev_server.api.deps import ServicesDep, StorageDep

router = APIRouter(prefix="/api")


def _page(per_page: int = 10) -> dict[str, Any]:
    return {"total": 0, "page": 0, "perPage": per_page, "hasMore": False}


@router.get("/auth/capabilities")
async def auth_capabilities(services: ServicesDep) -> dict[str, Any]:
    # Authentication itself happened before this route (dev_server.auth.AuthMiddleware).
    return {"enabled": services.auth_enabled, "login": None}


@router.get("/auth/me")
async def auth_me() -> None:
    return None


@router.get("/system/packages")
async def system_packages(storage: StorageDep) -> dict[str, Any]:
    return {
        "packages": [],
        "isDev": False,
        "cmsEnabled": False,
        "liveKitConnectionRouteEnabled": False,
        "observabilityEnabled": True,
        "storageType": "LibSQLStore",
        "observabilityStorageType": "DuckDBStore",
        "observabilityStorageCapabilities": {
            "metrics": storage.has("observability"),
            "logs": storage.has("observability"),
            "traceQueryDiscovery": storage.has("observability"),
        },
    }


_EMPTY_OBJECTS = ("/workflows", "/workflows/run-counts", "/processors", "/scores/scorers")  # /tools: tools.py


def _empty_object() -> dict[str, Any]:
    return {}


for _path in _EMPTY_OBJECTS:
    router.add_api_route(_path, _empty_object, methods=["GET"])


@router.get("/mcp/v0/servers")
async def mcp_servers() -> dict[str, Any]:
    return {"servers": [], "total_count": 0, "next": None}


@router.get("/workspaces")
async def workspaces() -> dict[str, Any]:
    return {"workspaces": []}


@router.get("/vectors")
async def vectors() -> dict[str, Any]:
    return {"vectors": []}


@router.get("/embedders")
async def embedders() -> dict[str, Any]:
    return {"embedders": []}


@router.get("/editor/builder/settings")
async def builder_settings() -> dict[str, Any]:
    return {"enabled": False, "modelPolicy": {"active": False}}


@router.get("/editor/builder/models/available")
async def builder_models() -> dict[str, Any]:
    return {"providers": []}


@router.get("/channels/platforms")
async def channel_platforms() -> list[Any]:
    return []


@router.get("/experiments/review-summary")
async def experiments_review_summary() -> dict[str, Any]:
    return {"counts": []}


@router.get("/datasets")
async def datasets() -> dict[str, Any]:
    return {"datasets": [], "pagination": _page()}
