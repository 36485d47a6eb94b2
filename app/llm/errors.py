"""One error type for every model failure, translated at exactly one boundary.

litellm raises a wide tree (its own classes subclass the ``openai`` SDK's), and wraps a
failure that happens mid-stream in ``MidStreamFallbackError``. ``translate`` maps all of it
onto ``ModelProviderError`` with an HTTP-ish ``status`` and a coarse ``kind``:

    AuthenticationError / PermissionDeniedError   401 / 403  auth
    RateLimitError                                429        rate_limit
    Timeout (checked before its base class)       504        timeout
    APIConnectionError                            502        connection
    BadRequestError, ContextWindowExceededError   400        bad_request
    NotFoundError                                 404        not_found
    any other APIError / unexpected exception     502        provider

``message`` is written here from the kind and the provider name only; the provider's own
text (which can echo a key prefix or the prompt) is never copied. The original exception
stays reachable as ``__cause__`` for logs.
"""

from __future__ import annotations

import re

_NAME = re.compile(r"^[a-z0-9_.\-]{1,40}$")
_MAX_UNWRAP = 5

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
}


class ModelProviderError(Exception):
    """A model call failed. ``message`` is short and safe to show to a user."""

    def __init__(self, status: int, kind: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind
        self.message = message

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


def _classify(exc: BaseException) -> tuple[int, str, str]:
    """(status, kind, message key) for one exception; litellm is imported lazily."""
    import litellm
    import openai

    # Order matters: subclasses before their bases (Timeout is an APIConnectionError,
    # ContextWindowExceededError is a BadRequestError).
    if isinstance(exc, litellm.ContextWindowExceededError):
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


def translate(exc: BaseException) -> ModelProviderError:
    """Map any exception raised by a litellm call onto ``ModelProviderError``."""
    if isinstance(exc, ModelProviderError):
        return exc
    inner = _unwrap(exc)
    if isinstance(inner, ModelProviderError):
        return inner
    status, kind, key = _classify(inner)
    provider = _provider_of(inner) or _provider_of(exc)
    message = _MESSAGES[key] + (f" ({provider})." if provider else ".")
    return ModelProviderError(status, kind, message)
