"""The model providers' own variables (keys, base URLs, cloud credentials), gathered from the
environment and the ``.env`` so that litellm and its SDKs see what the settings saw."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from dotenv import dotenv_values

# Variables model providers are configured with (read by litellm and its SDKs): keys, base
# URLs, API versions, and the AWS / Azure / Vertex / Google families (and the two names
# litellm reads for the providers of dev_server.llm.known_providers that the patterns would miss).
PROVIDER_VARIABLE = re.compile(
    r"^(?!DEV_SERVER_)(?:[A-Z0-9_]+_(?:API_KEY|API_BASE|BASE_URL|API_VERSION|API_TOKEN|AUTH_TOKEN|ACCOUNT_ID)"
    r"|(?:AWS|AZURE|VERTEXAI|VERTEX|WATSONX|OLLAMA|DATABRICKS)_[A-Z0-9_]+"
    r"|GOOGLE_APPLICATION_CREDENTIALS|GOOGLE_CLOUD_PROJECT|TOGETHER_AI_TOKEN|USE_LITELLM_PROXY)$")


def collect_provider_env(environ: Mapping[str, str], env_file: Path | None) -> dict[str, str]:
    """Provider variables from ``env_file`` and ``environ`` (which wins), empty values dropped."""
    found: dict[str, str] = {}
    sources = [dotenv_values(env_file) if env_file else {}, environ]
    for source in sources:
        for name, value in source.items():
            if value and value.strip() and PROVIDER_VARIABLE.match(name):
                found[name] = value.strip()
    return found
