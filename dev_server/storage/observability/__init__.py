"""The observability domain's SQL, on DuckDB: writing spans, traces and logs (``writer``),
and the Studio's reads of them (``reads``, ``where``, ``discovery``, ``metrics``, with the
queryable fields in ``query_fields``). Storage owns all SQL; ``dev_server.observability``
maps OTLP to these rows and exports them, and holds no SQL.
"""
