"""Token estimates for image and file parts, by provider, without reading them as text.

``dev_server.om.tokens.counting`` counts a message's text with tokenx; an attachment goes through here
instead, because a base64 image read as text would count hundreds of thousands of tokens
for what a model sees as a few hundred. Nothing here touches the network or decodes a
whole image: dimensions come from the part (``width``/``height``, ``imageWidth``/
``imageHeight``, ``providerMetadata.mastra.imageDimensions``) or from the PNG, JPEG, GIF or
WebP header of inline data (a ``data:`` URL or bare base64), of which only the few bytes the
header needs are decoded. A remote URL gives neither dimensions nor size.

The rules, after the providers' published ones (docs/observational-memory.md#tokens):

* OpenAI and no provider: 85 tokens, plus 170 per 512-px tile in high detail, after the
  image is fitted into 2048x2048 and its short side brought down to 768. ``auto`` detail is
  high when the long side exceeds 768 px (or, size only, the data exceeds 1 MiB). High
  detail with unknown dimensions uses the size (1, 4, 6 or 8 tiles up to 512 KiB, 2 MiB,
  4 MiB, beyond), and 4 tiles when the size is unknown too.
* Google: 258 per 768-px tile (one tile when the dimensions are unknown); Gemini 3 models
  (``provider="google/gemini-3..."``) a flat 280/560/1120/2240 by ``mediaResolution``
  (1120 when unspecified).
* Anthropic: width x height / 750 with the long edge capped at 1568 px. Unknown
  dimensions: by size 341, 1366, 2048 or 2731 (at most 512 KiB, 2 MiB, 4 MiB, beyond), and
  1600 (a ~1.15 megapixel image, Anthropic's largest unscaled size) for a remote URL.
* Other files: 4 bytes per token (at least 1). PDFs, whose bytes are mostly compressed
  streams, are priced per provider instead: Google ``bytes/20`` (at least 258), Anthropic
  ``bytes/3`` (at least 1500), others ``bytes/4`` (at least 500). A file known only by its URL
  is counted as the text of a small descriptor (type, MIME type, file name).

A caller that knows better stamps ``providerMetadata.mastra.tokenEstimate =
{v: 0, source: "client", key: "client", tokens: N}`` on the part, and N wins.
"""

from __future__ import annotations

import base64
import binascii
import io
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, unquote_to_bytes, urlsplit

CLIENT_SOURCE = "client"

OPENAI_BASE_TOKENS = 85
OPENAI_TILE_TOKENS = 170
OPENAI_FALLBACK_TILES = 4
GOOGLE_TILE_TOKENS = 258
GEMINI_3_TOKENS_BY_RESOLUTION = {"low": 280, "medium": 560, "high": 1120, "ultra_high": 2240, "unspecified": 1120}
ANTHROPIC_PIXELS_PER_TOKEN = 750
ANTHROPIC_MAX_LONG_EDGE = 1568
ANTHROPIC_URL_IMAGE_TOKENS = 1600
BYTES_PER_TOKEN = 4

_KIB, _MIB = 1024, 1024 * 1024
_IMAGE_EXTENSIONS = frozenset({"png", "jpg", "jpeg", "webp", "gif", "bmp", "tiff", "tif", "heic", "heif", "avif"})
_BASE64 = re.compile(r"[A-Za-z0-9+/]+={0,2}")
_MAX_HEADER_BYTES = 16 * _MIB  # where a JPEG's frame header is looked for at most (256 full segments)

ByteReader = Callable[[int, int], bytes]  # (offset, length) -> at most that many bytes


@dataclass(frozen=True)
class AttachmentEstimate:
    """What an attachment costs: ``tokens`` for ``kind``, whose cache key hashes ``payload``.

    ``tokens`` is None when the payload itself is to be counted as text (a file known only
    by its URL, counted by its descriptor).
    """

    kind: str
    payload: str
    tokens: int | None


def client_estimate(part: dict[str, Any]) -> int | float | None:
    """The caller-stamped estimate on an image or file part, if it has a usable one."""
    stamped = _get(_get(_get(part, "providerMetadata"), "mastra"), "tokenEstimate")
    if not isinstance(stamped, dict):
        return None
    for entry in (stamped, *stamped.values()):
        if _get(entry, "source") == CLIENT_SOURCE and isinstance(_get(entry, "key"), str) \
                and isinstance(_get(entry, "v"), (int, float)) and _is_count(_get(entry, "tokens")):
            return entry["tokens"]
    return None


def result_attachments(result: Any) -> list[tuple[dict[str, Any], dict[str, Any] | None]] | None:
    """The content items of a tool result that returns media (``{type: "content", value:
    [...]}`` or ``{content: [...]}``), each with the image or file part it stands for (None
    for text and other items); None when the result holds no inline attachment."""
    if not isinstance(result, dict):
        return None
    items = result.get("value") if result.get("type") == "content" else None
    items = items if isinstance(items, list) else result.get("content")
    if not isinstance(items, list):
        return None
    pairs = [(item, _attachment_in_result(item)) for item in items if isinstance(item, dict)]
    return pairs if any(attachment is not None for _, attachment in pairs) else None


def _attachment_in_result(item: dict[str, Any]) -> dict[str, Any] | None:
    item_type, data = item.get("type"), item.get("data")
    mime = item.get("mediaType") or item.get("mimeType")
    if not isinstance(data, str) or item_type == "text":
        return None
    common = {"mimeType": mime, "providerOptions": item.get("providerOptions"),
              "providerMetadata": item.get("providerMetadata")}
    if item_type in ("image", "image-data") or (item_type == "media" and str(mime or "").startswith("image/")):
        return {"type": "image", "image": data, **common}
    if item_type in ("audio", "file-data", "media"):
        return {"type": "file", "data": data, "filename": item.get("filename"), **common}
    return None


def estimate_attachment(part: dict[str, Any], provider: str | None) -> AttachmentEstimate | None:
    """The estimate for an ``image`` or ``file`` part; None for any other part."""
    part_type = part.get("type")
    if part_type == "image":
        return _image_estimate(part, part.get("image"), "image", provider)
    if part_type != "file":
        return None
    if is_image_like_file(part):
        return _image_estimate(part, part.get("data"), "image-like-file", provider)
    size = _asset_stats(part.get("data"))[1]
    mime = _mime_type(part, "application/octet-stream")
    if size is not None:
        provider_id, model_id = split_provider(provider)
        payload = _compact({"kind": "non-image-file", "provider": provider_id, "modelId": model_id,
                            "estimator": "bytes", "sizeBytes": size, "mimeType": mime, "filename": _filename(part)})
        return AttachmentEstimate("non-image-file", payload, file_tokens_from_bytes(provider_id, mime, size))
    descriptor = _compact({"type": "file", "mimeType": _get(part, "mimeType") or _get(part, "mediaType"),
                           "filename": _filename(part)})
    return AttachmentEstimate("file-descriptor", descriptor, None)


def is_image_like_file(part: dict[str, Any]) -> bool:
    """A ``file`` part that holds an image: by MIME type, data URL, or file extension."""
    mime = part.get("mimeType") or part.get("mediaType")
    if isinstance(mime, str) and mime.lower().startswith("image/"):
        return True
    data = part.get("data")
    if isinstance(data, str) and data.startswith("data:image/"):
        return True
    if isinstance(data, str) and _is_http_url(data) and _has_image_extension(urlsplit(data).path):
        return True
    return _has_image_extension(part.get("filename"))


def split_provider(provider: str | None) -> tuple[str | None, str | None]:
    """``"google/gemini-3-pro"`` -> ``("google", "gemini-3-pro")``; ``"openai"`` -> ``("openai", None)``."""
    if not provider:
        return None, None
    name, _, model = provider.partition("/")
    return name.lower() or None, model.lower() or None


def file_tokens_from_bytes(provider: str | None, mime_type: str, size: int) -> int:
    mime = mime_type.lower().split(";", 1)[0].strip()
    if mime == "application/pdf":
        if provider == "google":
            return max(258, math.ceil(size / 20))
        if provider == "anthropic":
            return max(1500, math.ceil(size / 3))
        return max(500, math.ceil(size / BYTES_PER_TOKEN))
    return max(1, math.ceil(size / BYTES_PER_TOKEN))


# --- images -----------------------------------------------------------------------------


def _image_estimate(part: dict[str, Any], asset: Any, kind: str, provider: str | None) -> AttachmentEstimate:
    provider_id, model_id = split_provider(provider)
    source, size, reader = _asset_stats(asset)
    width, height = _stated_dimensions(part)
    if not (width and height) and reader is not None:
        measured = image_dimensions(reader)
        if measured:
            width, height = width or measured[0], height or measured[1]
    described: dict[str, Any] = {"kind": kind, "provider": provider_id, "modelId": model_id}
    if provider_id == "google":
        if (model_id or "").startswith("gemini-3"):
            resolution = _media_resolution(part)
            tokens, described["estimator"] = GEMINI_3_TOKENS_BY_RESOLUTION[resolution], "google-gemini-3"
            described["mediaResolution"] = resolution
        else:
            tiles = math.ceil(width / 768) * math.ceil(height / 768) if width and height else 1
            tokens, described["estimator"] = max(1, tiles) * GOOGLE_TILE_TOKENS, "google-legacy"
    elif provider_id == "anthropic":
        tokens, described["estimator"] = _anthropic_tokens(width, height, size), "anthropic"
    else:
        detail = _image_detail(part)
        effective = detail if detail != "auto" else _auto_detail(width, height, size)
        tiles = _openai_tiles(width, height, size) if effective == "high" else 0
        tokens = OPENAI_BASE_TOKENS + tiles * OPENAI_TILE_TOKENS
        described.update(estimator="openai" if provider_id == "openai" else "fallback", detail=detail,
                         effectiveDetail=effective)
    described.update(width=width, height=height, source=source, sizeBytes=size,
                     mimeType=_get(part, "mimeType") or _get(part, "mediaType"), filename=_get(part, "filename"))
    return AttachmentEstimate(kind, _compact(described), tokens)


def _auto_detail(width: float | None, height: float | None, size: int | None) -> str:
    if width and height:
        return "high" if max(width, height) > 768 else "low"
    if size is not None:
        return "high" if size > _MIB else "low"
    return "low"


def _openai_tiles(width: float | None, height: float | None, size: int | None) -> int:
    if width and height:
        scale = min(1.0, 2048 / max(width, height))
        width, height = width * scale, height * scale
        scale = min(1.0, 768 / min(width, height))
        width, height = max(1, _js_round(width * scale)), max(1, _js_round(height * scale))
        return max(1, math.ceil(width / 512) * math.ceil(height / 512))
    if size is not None:
        return 1 if size <= 512 * _KIB else 4 if size <= 2 * _MIB else 6 if size <= 4 * _MIB else 8
    return OPENAI_FALLBACK_TILES


def _anthropic_tokens(width: float | None, height: float | None, size: int | None) -> int:
    if width and height:
        long_edge = max(width, height)
        if long_edge > ANTHROPIC_MAX_LONG_EDGE:
            ratio = ANTHROPIC_MAX_LONG_EDGE / long_edge
            width, height = max(1, _js_round(width * ratio)), max(1, _js_round(height * ratio))
        return max(1, math.ceil(width * height / ANTHROPIC_PIXELS_PER_TOKEN))
    if size is not None:
        return 341 if size <= 512 * _KIB else 1366 if size <= 2 * _MIB else 2048 if size <= 4 * _MIB else 2731
    return ANTHROPIC_URL_IMAGE_TOKENS


def _image_detail(part: dict[str, Any]) -> str:
    options, metadata = _get(part.get("providerOptions"), "openai"), _get(part.get("providerMetadata"), "openai")
    for value in (part.get("detail"), part.get("imageDetail"), _get(options, "detail"), _get(options, "imageDetail"),
                  _get(metadata, "detail"), _get(metadata, "imageDetail"),
                  _get(_get(part.get("providerMetadata"), "mastra"), "imageDetail")):
        if value is not None:
            return value if value in ("low", "high") else "auto"
    return "auto"


def _media_resolution(part: dict[str, Any]) -> str:
    for value in (part.get("mediaResolution"), _get(_get(part.get("providerOptions"), "google"), "mediaResolution"),
                  _get(_get(part.get("providerMetadata"), "google"), "mediaResolution"),
                  _get(_get(part.get("providerMetadata"), "mastra"), "mediaResolution")):
        if isinstance(value, str) and value in GEMINI_3_TOKENS_BY_RESOLUTION:
            return value
    return "unspecified"


def _stated_dimensions(part: dict[str, Any]) -> tuple[float | None, float | None]:
    stored = _get(_get(part.get("providerMetadata"), "mastra"), "imageDimensions")
    width = _positive(part.get("width")) or _positive(part.get("imageWidth")) or _positive(_get(stored, "width"))
    height = _positive(part.get("height")) or _positive(part.get("imageHeight")) or _positive(_get(stored, "height"))
    return width, height


# --- reading the asset ------------------------------------------------------------------


def _asset_stats(asset: Any) -> tuple[str, int | None, ByteReader | None]:
    """Where the asset lives (``url``, ``data-uri``, ``binary``), its byte size, and a reader."""
    if isinstance(asset, (bytes, bytearray, memoryview)):
        raw = bytes(asset)
        return "binary", len(raw), lambda start, length: raw[start:start + length]
    if not isinstance(asset, str):
        return "binary", None, None
    if _is_http_url(asset):
        return "url", None, None
    if asset.startswith("data:"):
        header, comma, payload = asset[5:].partition(",")
        if not comma:
            return "data-uri", 0, None
        if ";base64" in header.lower():
            payload = _without_whitespace(payload)
            return "data-uri", _base64_size(payload), _base64_reader(payload)
        raw = unquote_to_bytes(payload)
        return "data-uri", len(raw), lambda start, length: raw[start:start + length]
    compact = _without_whitespace(asset)
    if _looks_like_base64(compact):
        return "binary", _base64_size(compact), _base64_reader(compact)
    return "binary", len(asset.encode("utf-8", "surrogatepass")), None


def _without_whitespace(text: str) -> str:
    if " " in text or "\n" in text or "\r" in text or "\t" in text:
        return re.sub(r"\s+", "", text)
    return text


def _base64_size(encoded: str) -> int:
    padding = 2 if encoded.endswith("==") else 1 if encoded.endswith("=") else 0
    return max(0, len(encoded) * 3 // 4 - padding)


def _looks_like_base64(value: str) -> bool:
    # a path or a sentence fails the alphabet; JPEG data starts with "/9j/", so "/" must pass
    return len(value) >= 16 and len(value) % 4 == 0 and _BASE64.fullmatch(value) is not None


def _base64_reader(encoded: str) -> ByteReader:
    """Decode only the 4-character groups that hold the bytes asked for."""
    def read(start: int, length: int) -> bytes:
        first_group, end_group = start // 3, -(-(start + length) // 3)
        chunk = encoded[first_group * 4:end_group * 4]
        if "-" in chunk or "_" in chunk:
            chunk = chunk.replace("-", "+").replace("_", "/")
        try:
            raw = base64.b64decode(chunk + "=" * (-len(chunk) % 4))
        except (binascii.Error, ValueError):
            return b""
        offset = start - first_group * 3
        return raw[offset:offset + length]
    return read


def image_dimensions(read: ByteReader) -> tuple[int, int] | None:
    """Width and height from a PNG, GIF, WebP or JPEG header (read by ``imagesize``); None
    for anything else. Other formats ``imagesize`` knows (BMP, TIFF, SVG...) are not
    measured: their parts are priced without dimensions, as they always were."""
    head = read(0, 16)
    if not (head.startswith((b"\x89PNG\r\n\x1a\n", b"GIF87a", b"GIF89a", b"\xff\xd8"))
            or (head[:4] == b"RIFF" and head[8:12] == b"WEBP")):
        return None
    import imagesize  # with xml.etree (for SVG): loaded by the first image measured, not at start-up

    width, height = imagesize.get(_ReaderFile(read), exif_rotation=False)
    if head[12:16] == b"VP8 ":  # imagesize keeps a lossy WebP's two scaling bits on each side
        width, height = width & 0x3FFF, height & 0x3FFF
    return (width, height) if width > 0 and height > 0 else None


class _ReaderFile:
    """A ``ByteReader`` as the seekable binary file ``imagesize`` reads: a block at a time,
    so that only the bytes around the header are ever decoded."""

    _BLOCK = 4096

    def __init__(self, read: ByteReader) -> None:
        self._read = read
        self._position = 0
        self._block_start = -1
        self._block = b""

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if whence == io.SEEK_CUR:
            offset += self._position
        elif whence != io.SEEK_SET:
            raise io.UnsupportedOperation("an attachment's size is not known here")
        self._position = max(0, offset)
        return self._position

    def tell(self) -> int:
        return self._position

    def read(self, size: int = -1) -> bytes:
        if size < 0:
            size = _MAX_HEADER_BYTES
        out = bytearray()
        while len(out) < size and self._position < _MAX_HEADER_BYTES:
            start = self._position - self._position % self._BLOCK
            if start != self._block_start:
                self._block_start, self._block = start, self._read(start, self._BLOCK)
            piece = self._block[self._position - start:self._position - start + size - len(out)]
            if not piece:
                break
            out += piece
            self._position += len(piece)
        return bytes(out)


# --- small helpers ----------------------------------------------------------------------


def _mime_type(part: dict[str, Any], fallback: str) -> str:
    mime = part.get("mimeType") or part.get("mediaType")
    if isinstance(mime, str) and mime.strip():
        return mime.strip()
    asset = part.get("data") if part.get("data") is not None else part.get("image")
    if isinstance(asset, str) and asset.startswith("data:"):
        end = min(i for i in (asset.find(";"), asset.find(","), len(asset)) if i != -1)
        if end > 5:
            return asset[5:end]
    return fallback


def _filename(part: dict[str, Any]) -> str | None:
    name = part.get("filename")
    if isinstance(name, str) and name.strip():
        return name.strip()
    data = part.get("data") if part.get("data") is not None else part.get("image")
    if isinstance(data, str) and _is_http_url(data):
        last = [segment for segment in urlsplit(data).path.split("/") if segment]
        return unquote(last[-1]) if last else None
    return None


def _has_image_extension(name: Any) -> bool:
    if not isinstance(name, str):
        return False
    stem = name.split("#", 1)[0].split("?", 1)[0]
    return "." in stem and stem.rsplit(".", 1)[1].lower() in _IMAGE_EXTENSIONS


def _is_http_url(value: Any) -> bool:
    return isinstance(value, str) and value[:8].lower().startswith(("http://", "https://"))


def _is_count(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0


def _positive(value: Any) -> float | None:
    return value if _is_count(value) and value > 0 else None


def _js_round(value: float) -> int:
    return math.floor(value + 0.5)


def _get(value: Any, key: str) -> Any:
    return value.get(key) if isinstance(value, dict) else None


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
