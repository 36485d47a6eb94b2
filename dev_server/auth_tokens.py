"""The ``DEV_SERVER_AUTH_TOKENS`` format (``token=principal,...``) and the service principal's
token derived from it: what the settings check at start and what ``dev_server.auth`` serves."""

from __future__ import annotations

import hashlib

# The principal the gateway's own span exporter authenticates as (dev_server.auth); no user token may name it.
SERVICE_PRINCIPAL = "@service"


def token_principals(spec: str) -> dict[str, str]:
    """``DEV_SERVER_AUTH_TOKENS`` (``token=principal,token2=principal2``) as token -> principal;
    ValueError naming what is wrong (never a token)."""
    pairs = {}
    for number, item in enumerate(filter(None, (part.strip() for part in spec.split(","))), start=1):
        token, sep, principal = (part.strip() for part in item.partition("="))
        if not sep or not token or not principal:
            raise ValueError(f"pair {number} is not token=principal (pairs are separated by commas)")
        if principal == SERVICE_PRINCIPAL:
            raise ValueError(f"pair {number} names the reserved principal {SERVICE_PRINCIPAL}")
        pairs[token] = principal
    if not pairs:
        raise ValueError("no token=principal pair")
    return pairs


def service_token(auth_tokens: str) -> str:
    """The service principal's token, derived from the configured user tokens
    (``DEV_SERVER_AUTH_TOKENS``), so both processes (and every replica) know it with no
    extra setting: the gateway's telemetry export presents it, the studio's auth accepts it."""
    return hashlib.sha256(f"dev-server service principal\n{auth_tokens}".encode()).hexdigest()
