"""``observation.observeAttachments``: which images and files the observer model is sent.

The transcript always keeps a placeholder line per attachment (``[Image #1: photo.png]``);
this option decides which of the files themselves go with it, as in Mastra:

* ``True``: every attachment; ``False``: none;
* a list of media-type patterns, matched case-insensitively: exact (``"application/pdf"``),
  a subtype wildcard (``"image/*"``), or ``"*"`` / ``"*/*"`` for everything; an empty list
  sends none. An image with no media type counts as ``image/*``, any other file with none
  as ``application/octet-stream``;
* ``"auto"``: every attachment when the observer model takes images or PDFs, none when it
  takes neither, every one when its capabilities are unknown (the model is not in
  litellm's model map; the local model takes everything).

Not given: images and PDFs (``["image/*", "application/pdf"]``, Mastra's code default; its
reference says ``true``). Images and files inside a tool result are filtered the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal

from dev_server.kernel.model import ResolvedModel

ObserveAttachments = bool | Literal["auto"] | tuple[str, ...]
AttachmentFilter = bool | tuple[str, ...]  # "auto" decided for one model
DEFAULT_OBSERVE_ATTACHMENTS: tuple[str, ...] = ("image/*", "application/pdf")


def parse_observe_attachments(name: str, value: Any, fail: Callable[[str, str], ValueError]) -> ObserveAttachments:
    if value is None:
        return DEFAULT_OBSERVE_ATTACHMENTS
    if isinstance(value, bool) or value == "auto":
        return value
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)) \
            and all(isinstance(pattern, str) for pattern in value):
        return tuple(value)
    raise fail(name, f"must be 'auto', true, false or a list of media types like ['image/*', 'application/pdf'], "
                     f"not {value!r}")


def for_model(setting: ObserveAttachments, model: ResolvedModel | None) -> AttachmentFilter:
    """The filter for a call to ``model``: ``"auto"`` decided by its capabilities."""
    if setting != "auto":
        return setting
    if model is None or not model.capabilities_known:
        return True
    return model.vision or model.pdf_input


def accepts(accepted: AttachmentFilter, media_type: str, *, image: bool) -> bool:
    """Whether an attachment of ``media_type`` (``image``: it is an image) goes to the observer."""
    if isinstance(accepted, bool):
        return accepted
    media = media_type.strip().lower()
    if "/" not in media:
        media = "image/*" if image else "application/octet-stream"
    return any(_matches(media, pattern) for pattern in accepted)


def _matches(media: str, pattern: str) -> bool:
    pattern = pattern.strip().lower()
    if not pattern:
        return False
    if pattern in ("*", "*/*"):
        return True
    if pattern.endswith("/*"):
        return media.startswith(pattern[:-1])
    return media == pattern
