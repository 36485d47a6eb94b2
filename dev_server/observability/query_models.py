"""Request bodies of the trace query routes (Mastra's Studio REST API: trace query, Mastra's trace query).

``TraceQuery`` is ``POST /observability/traces/query``; ``FieldsQuery`` / ``ValuesQuery`` are
``.../query/fields`` and ``.../query/values``. Types are strict, as Mastra's schema is: a
limit is a JSON integer (not ``"25"``, not ``25.0``, not beyond its maximum however many
digits it has), a time is an ISO-8601 string, a search is valid Unicode. ``where`` is kept as
a JSON object here and checked by ``where.compile_where`` (field by field, with limits).
Keys the contract has and this server does not act on (``group``, ``pagination``, ``mode``)
are accepted and ignored; other unknown keys are dropped.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from dev_server.kernel.clock import parse_iso
from dev_server.storage.observability.query_fields import SCOPES
from dev_server.storage.observability.where import TraceQueryInvalid, check_text

MAX_DISCOVERY_RANGE = timedelta(days=31)


def _unicode(value: str) -> str:
    try:
        return check_text(value, [])
    except TraceQueryInvalid as exc:
        raise ValueError(exc.issues[0]["message"]) from None


def _iso(value: Any) -> datetime:
    if not isinstance(value, str):
        raise ValueError("must be an ISO-8601 date-time string")
    try:
        return parse_iso(_unicode(value))
    except ValueError as exc:
        raise ValueError(str(exc) if "Unicode" in str(exc) else "must be an ISO-8601 date-time string") from None


def _lower(value: Any) -> Any:
    return value.lower() if isinstance(value, str) else value


def _text(value: Any) -> Any:
    return _unicode(value) if isinstance(value, str) else value


IsoTime = Annotated[datetime, BeforeValidator(_iso)]
Text = Annotated[str, Field(strict=True), BeforeValidator(_text)]


class TimeRange(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    start: IsoTime | None = Field(None, alias="from")
    end: IsoTime | None = Field(None, alias="to")


class Order(BaseModel):
    model_config = ConfigDict(extra="forbid")

    field: Literal["startedAt", "endedAt"] = "startedAt"
    direction: Annotated[Literal["asc", "desc"], BeforeValidator(_lower)] = "desc"


class Page(BaseModel):
    model_config = ConfigDict(extra="forbid")

    limit: Annotated[int, Field(strict=True, ge=1, le=1000)] = 100
    after: Annotated[Text, Field(min_length=1, max_length=4096)] | None = None


class TraceQuery(BaseModel):
    timeRange: TimeRange | None = None
    where: dict[str, Any] | None = None
    orderBy: Annotated[list[Order], Field(min_length=1, max_length=1)] | None = None
    page: Page = Page()
    group: Any = None
    pagination: Any = None
    mode: Any = None

    @property
    def order(self) -> Order:
        return self.orderBy[0] if self.orderBy else Order()


class DiscoveryRange(BaseModel):
    """A half-open range ``[from, to)`` of at most 31 days, both ends required."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    start: IsoTime = Field(alias="from")
    end: IsoTime = Field(alias="to")

    @model_validator(mode="after")
    def _bounded(self) -> DiscoveryRange:
        if not self.start < self.end:
            raise ValueError("from must be earlier than to")
        if self.end - self.start > MAX_DISCOVERY_RANGE:
            raise ValueError("the range can span at most 31 days")
        return self


class FieldsQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")

    timeRange: DiscoveryRange
    predicateScope: Literal[SCOPES]  # type: ignore[valid-type]
    search: Annotated[Text, Field(max_length=256)] = ""
    limit: Annotated[int, Field(strict=True, ge=1, le=100)] = 25


class ValuesQuery(FieldsQuery):
    path: Annotated[Text, Field(min_length=1, max_length=128)]
