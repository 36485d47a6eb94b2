"""One error type for every model failure, translated at exactly one boundary.

litellm raises a wide tree (its own classes subclass the ``openai`` SDK's), and wraps a
failure that happens mid-stream in ``MidStreamFallbackError``. ``translate`` maps all of it
onto ``ModelProviderError`` with an HTTP-ish ``status`` and a coarse ``kind``:

    AuthenticationError / PermissionDeniedError   401 / 403  auth
    RateLimitError                                429        rate_limit
    Timeout (checked before its base class)       504        timeout
    APIConnectionError, or a refused / unresolved
      connection anywhere in the chain            502        connection
    BadRequestError, ContextWindowExceededError   400        bad_request
    NotFoundError                                 404        not_found
    a response that is not a valid stream         502        response
    any other APIError / unexpected exception     502        provider

A *response* error is the provider answering with something that is not a chat completion
stream: a chunk that is not JSON (``JSONDecodeError`` in the chain), a chunk of the wrong
shape (``AttributeError``/``TypeError``/``KeyError``/pydantic's ``ValidationError`` while
litellm parses it), or an in-band ``{"error": ...}`` event (a bare ``openai.APIError``).
litellm wraps all of these in ``APIConnectionError``, which would otherwise read as
"Could not reach the model provider". The other way round, litellm reports a connection
that was refused or whose host did not resolve as a 500 ``InternalServerError`` (its OpenAI
route wraps the SDK's connection error), which would read as the provider's own error: a
``ConnectionError``, ``socket.gaierror`` or ``httpx.ConnectError`` in the chain makes it a
*connection* error. A *response* error's message carries the provider's own words,
shortened and with anything key-like redacted. The client raises three of these kinds
itself: ``timeout`` when its first-token or total deadline passes, ``response`` for a
stream without content (an empty stream, or a plain JSON body where a stream was asked
for), and ``not_configured`` (503) when a model cannot be called and the local fallback is
off.

Other messages are written here from the kind and the provider name only; a provider's
status-error text (which can echo a key prefix or the prompt) is not copied. The original
exception stays reachable as ``__cause__`` for logs.
"""

from __future__ import annotations

import json
import re
import socket
from typing import Any

from dev_server.llm.offline import loaded_litellm

_NAME = re.compile(r"^[a-z0-9_.\-]{1,40}$")
_MAX_UNWRAP = 5
_MAX_DETAIL = 300
_KEY_LIKE = re.compile(r"\b(?:sk|pk|rk|key|gsk|xai)-[A-Za-z0-9_\-]{6,}|\b[A-Za-z0-9_\-]{32,}\b")
_SHAPE_ERRORS = (AttributeError, TypeError, KeyError, IndexError)

_MESSAGES = {
    "auth": "The model provider rejected the API key",
    "forbidden": "The API key is not allowed to use this model",
    "rate_limit": "The model provider is rate limiting requests; try again shortly",
    "timeout": "The model provider did not answer in time",
    "connection": "Could not reach the model provider",
    "context": "The conversation is too long for this model's context window",
    "bad_request": "The model provider rejected the request",
    "not_found": "The model was not found at the provider",
    "provider": "The model provider returned an error",
    "response": "The model provider sent an invalid response",
}


class ModelProviderError(Exception):
    """A model call failed. ``message`` is short and safe to show to a user. ``usage`` is what
    the failed call used when the provider reported it before failing (a ``Usage``), else None."""

    def __init__(self, status: int, kind: str, message: str, usage: Any = None) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind
        self.message = message
        self.usage = usage

    def __repr__(self) -> str:
        return f"ModelProviderError(status={self.status}, kind={self.kind!r}, message={self.message!r})"


def _unwrap(exc: BaseException) -> BaseException:
    # MidStreamFallbackError (a 503 ServiceUnavailableError) hides the real failure.
    for _ in range(_MAX_UNWRAP):
        inner = getattr(exc, "original_exception", None)
        if not isinstance(inner, BaseException) or inner is exc:
            break
        exc = inner
    return exc


def _provider_of(exc: BaseException) -> str | None:
    name = getattr(exc, "llm_provider", None)
    return name if isinstance(name, str) and _NAME.match(name) else None


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and what it wraps: litellm's ``original_exception``, then ``__cause__`` /
    ``__context__``."""
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and all(current is not s for s in seen) and len(seen) < 4 * _MAX_UNWRAP:
        seen.append(current)
        inner = getattr(current, "original_exception", None)
        current = inner if isinstance(inner, BaseException) else (current.__cause__ or current.__context__)
    return seen


def detail(text: str) -> str:
    """The provider's words, safe to show: one line, key-like tokens redacted, shortened."""
    flat = " ".join(str(text).split())
    flat = _KEY_LIKE.sub("[redacted]", flat)
    return flat if len(flat) <= _MAX_DETAIL else flat[: _MAX_DETAIL - 1] + "…"


def _response_problem(chain: list[BaseException]) -> str | None:
    """What was wrong with the provider's response, if that is what failed."""
    import openai
    import pydantic

    for exc in chain:
        if isinstance(exc, json.JSONDecodeError):
            return f"a stream chunk is not JSON ({exc.msg})"
        if type(exc) is openai.APIError:  # raised for an in-band {"error": ...} event
            return detail(getattr(exc, "message", None) or str(exc))
    if any(isinstance(e, openai.APIConnectionError) for e in chain):
        for exc in chain:
            if isinstance(exc, (*_SHAPE_ERRORS, pydantic.ValidationError)):
                return f"a stream chunk has an unexpected shape ({detail(str(exc))})"
    return None


def _could_not_connect(chain: list[BaseException]) -> bool:
    import httpx

    return any(isinstance(exc, (ConnectionError, socket.gaierror, httpx.ConnectError)) for exc in chain)


def _classify(exc: BaseException) -> tuple[int, str, str]:
    """(status, kind, message key) for one exception. Never imports litellm: an exception
    can only be one of litellm's own once litellm is loaded."""
    import openai

    litellm = loaded_litellm()
    # Order matters: subclasses before their bases (Timeout is an APIConnectionError,
    # ContextWindowExceededError is a BadRequestError).
    if litellm is not None and isinstance(exc, litellm.ContextWindowExceededError):
        return 400, "bad_request", "context"
    if isinstance(exc, openai.AuthenticationError):
        return 401, "auth", "auth"
    if isinstance(exc, openai.PermissionDeniedError):
        return 403, "auth", "forbidden"
    if isinstance(exc, openai.RateLimitError):
        return 429, "rate_limit", "rate_limit"
    if isinstance(exc, (openai.APITimeoutError, TimeoutError)):
        return 504, "timeout", "timeout"
    if isinstance(exc, openai.APIConnectionError):
        return 502, "connection", "connection"
    if isinstance(exc, (openai.BadRequestError, openai.UnprocessableEntityError)):
        return 400, "bad_request", "bad_request"
    if isinstance(exc, openai.NotFoundError):
        return 404, "not_found", "not_found"
    return 502, "provider", "provider"


# The status each kind has when ``translate`` (or the client itself) raises it.
KIND_STATUS = {"auth": 401, "rate_limit": 429, "timeout": 504, "connection": 502, "bad_request": 400,
               "not_found": 404, "provider": 502, "response": 502, "not_configured": 503}
_NOT_CONFIGURED = "The model is not configured"


def provider_error(kind: str, message: str | None = None) -> ModelProviderError:
    """The ``ModelProviderError`` of a failure of ``kind``, with the status and (unless
    ``message`` is given) the words ``translate`` gives it: what a scripted failure raises."""
    if kind not in KIND_STATUS:
        raise ValueError(f"unknown model error kind {kind!r}; expected one of {', '.join(KIND_STATUS)}")
    return ModelProviderError(KIND_STATUS[kind], kind, message or f"{_MESSAGES.get(kind, _NOT_CONFIGURED)}.")


def connection_message(provider: str) -> str:
    """What a dropped connection to ``provider`` reads as (``translate`` says the same)."""
    return f"{_MESSAGES['connection']} ({provider})."


def at_endpoint(error: ModelProviderError, endpoint: str | None) -> ModelProviderError:
    """A connection error that says where it tried to connect (``ModelResolver.endpoint``:
    ``http://host:port/v1 (OPENAI_BASE_URL)``); any other error as it is."""
    if error.kind != "connection" or not endpoint:
        return error
    return ModelProviderError(error.status, error.kind, f"{error.message.rstrip('.')} at {endpoint}.", error.usage)


def translate(exc: BaseException) -> ModelProviderError:
    """Map any exception raised by a litellm call onto ``ModelProviderError``."""
    if isinstance(exc, ModelProviderError):
        return exc
    inner = _unwrap(exc)
    if isinstance(inner, ModelProviderError):
        return inner
    provider = _provider_of(inner) or _provider_of(exc)
    suffix = f" ({provider})" if provider else ""
    chain = _chain(exc)
    problem = _response_problem(chain)
    if problem is not None:
        return ModelProviderError(502, "response", f"{_MESSAGES['response']}{suffix}: {problem}")
    status, kind, key = (502, "connection", "connection") if _could_not_connect(chain) else _classify(inner)
    return ModelProviderError(status, kind, _MESSAGES[key] + suffix + ".")
