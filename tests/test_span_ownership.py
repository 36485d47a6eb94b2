"""Ownership of spans and logs with authentication on (issue 9.2): rows an authenticated user
sends over OTLP are filed under that user's resource whatever they claim, the gateway's
exporter (the service principal) files them under the run's resource, nobody replaces
another resource's span by reusing its ids, and every discovery list (trace filter bars,
trace-query fields and values, metric label values) shows only the caller's own values.
Real HTTP to a real uvicorn, rows in a real DuckDB file."""

from __future__ import annotations

import json

from dev_server.auth import service_token
from tests.kit.local_http import local_http
from tests.kit.servers import server_fixture
from tests.kit.traces import json_request, log_request, rows

TOKENS = "ta=alice,tb=bob"


secured = server_fixture("studio", scope="function", data="data_dir", inprocess=True,
                         settings={"telemetry": False, "auth_tokens": TOKENS})


def as_user(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


def claimed(trace: str, span: str, resource: str, **attrs: str) -> dict:
    values = {"mastra.resource_id": resource, "mastra.entity_type": "agent", "mastra.entity_name": "Secret Agent",
              "mastra.tags": json.dumps(["secret-tag"]), **attrs}
    body = json_request(traceId=trace, spanId=span, attributes=[
        {"key": k, "value": {"stringValue": v}} for k, v in values.items()])
    body["resourceSpans"][0]["resource"]["attributes"] += [
        {"key": "deployment.environment", "value": {"stringValue": "alice-env"}}]
    return body


def trace_ids(server, token: str) -> list[str]:
    response = local_http.post(f"{server.url}/api/observability/traces/query", json={}, headers=as_user(token))
    assert response.status_code == 200, response.text
    return [t["traceId"] for t in response.json()["traces"]]


def test_spans_from_a_user_get_that_users_resource_whatever_they_claim(secured):
    bob_trace, service_trace = "b1" * 16, "5e" * 16
    response = local_http.post(f"{secured.url}/v1/traces", json=claimed(bob_trace, "b1" * 8, "user:alice"),
                          headers=as_user("tb"))
    assert response.status_code == 200
    assert rows(secured, "SELECT DISTINCT resource_id FROM spans") == [("user:bob",)]
    assert trace_ids(secured, "ta") == [] and trace_ids(secured, "tb") == [bob_trace]
    # the gateway's exporter (the service principal) files rows under the run's resource
    response = local_http.post(f"{secured.url}/v1/traces", json=claimed(service_trace, "5e" * 8, "user:alice"),
                          headers=as_user(service_token(TOKENS)))
    assert response.status_code == 200
    assert trace_ids(secured, "ta") == [service_trace] and trace_ids(secured, "tb") == [bob_trace]
    assert local_http.get(f"{secured.url}/api/observability/traces/{service_trace}",
                     headers=as_user("tb")).status_code == 404


def test_a_user_cannot_overwrite_anothers_span_by_reusing_its_ids(secured):
    alice = claimed("a1" * 16, "a1" * 8, "user:alice")
    assert local_http.post(f"{secured.url}/v1/traces", json=alice,
                           headers=as_user(service_token(TOKENS))).status_code == 200
    forged = claimed("a1" * 16, "a1" * 8, "user:bob", **{"mastra.entity_name": "defaced"})
    response = local_http.post(f"{secured.url}/v1/traces", json=forged, headers=as_user("tb"))
    assert response.status_code == 200
    assert response.json()["partialSuccess"]["rejectedSpans"] == "1"  # int64 is a string in OTLP/JSON
    assert rows(secured, "SELECT entity_name, resource_id FROM spans") == [("Secret Agent", "user:alice")]
    assert rows(secured, "SELECT entity_name, resource_id FROM traces") == [("Secret Agent", "user:alice")]


def test_logs_from_a_user_get_that_users_resource(secured):
    body = log_request()
    for record in body["resourceLogs"][0]["scopeLogs"][0]["logRecords"]:
        record["attributes"].append({"key": "mastra.resource_id", "value": {"stringValue": "user:alice"}})
    assert local_http.post(f"{secured.url}/v1/logs", json=body, headers=as_user("tb")).status_code == 200
    assert rows(secured, "SELECT DISTINCT resource_id FROM logs") == [("user:bob",)]
    listed = local_http.get(f"{secured.url}/api/observability/logs", headers=as_user("ta")).json()
    assert listed["logs"] == []


DISCOVERY = {"entity-names": "names", "entity-types": "entityTypes", "environments": "environments",
             "service-names": "serviceNames", "tags": "tags"}


def test_discovery_lists_only_what_the_caller_may_see(secured):
    alice = claimed("a2" * 16, "a2" * 8, "user:alice", **{"mastra.span_type": "agent_run"})
    alice["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["attributes"].append(
        {"key": "mastra.metadata", "value": {"stringValue": json.dumps({"region": "alice-land"})}})
    assert local_http.post(f"{secured.url}/v1/traces", json=alice,
                           headers=as_user(service_token(TOKENS))).status_code == 200
    seen = {}
    for token in ("ta", "tb"):
        seen[token] = {route: local_http.get(f"{secured.url}/api/observability/discovery/{route}",
                                        params={"entityType": "agent"} if route == "entity-names" else None,
                                        headers=as_user(token)).json()[key] for route, key in DISCOVERY.items()}
    assert seen["ta"] == {"entity-names": ["Secret Agent"], "entity-types": ["agent"], "environments": ["alice-env"],
                          "service-names": ["js"], "tags": ["secret-tag"]}
    assert seen["tb"] == {route: [] for route in DISCOVERY}

    window = {"from": "2023-11-01T00:00:00Z", "to": "2023-11-30T00:00:00Z"}  # json_request's spans: 2023-11-14
    def discover(route: str, token: str, **body) -> dict:
        response = local_http.post(f"{secured.url}/api/observability/traces/query/{route}", headers=as_user(token),
                              json={"timeRange": window, "limit": 25, **body})
        assert response.status_code == 200, response.text
        return response.json()
    for token, wanted in (("ta", [{"value": "Secret Agent", "count": 1}]), ("tb", [])):
        assert discover("values", token, predicateScope="trace", path="entityName")["values"] == wanted
        assert discover("values", token, predicateScope="spans", path="entityName")["values"] == wanted
    assert [f["path"] for f in discover("fields", "ta", predicateScope="trace")["observedFields"]] == [
        "metadata.region"]
    assert discover("fields", "tb", predicateScope="trace")["observedFields"] == []
    assert discover("values", "tb", predicateScope="trace", path="metadata.region")["values"] == []

    label = {"metricName": "mastra_agent_duration_ms", "labelKey": "entityName"}
    values = {t: local_http.get(f"{secured.url}/api/observability/discovery/metric-label-values", params=label,
                           headers=as_user(t)).json()["values"] for t in ("ta", "tb")}
    assert values == {"ta": ["Secret Agent"], "tb": []}


def test_a_span_claiming_a_foreign_parent_does_not_reveal_it_in_metrics(secured):
    alice = claimed("a3" * 16, "a3" * 8, "user:alice", **{"mastra.span_type": "agent_run"})
    assert local_http.post(f"{secured.url}/v1/traces", json=alice,
                           headers=as_user(service_token(TOKENS))).status_code == 200
    child = claimed("a3" * 16, "b3" * 8, "user:bob", **{"mastra.span_type": "agent_run", "mastra.entity_name": "Bob"})
    child["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["parentSpanId"] = "a3" * 8  # alice's root span
    assert local_http.post(f"{secured.url}/v1/traces", json=child, headers=as_user("tb")).status_code == 200
    body = {"name": ["mastra_agent_duration_ms"], "aggregation": "count",
            "groupBy": ["entityName", "parentEntityName", "rootEntityName"]}
    groups = local_http.post(f"{secured.url}/api/observability/metrics/breakdown", json=body,
                             headers=as_user("tb")).json()
    assert [g["dimensions"] for g in groups["groups"]] == [
        {"entityName": "Bob", "parentEntityName": None, "rootEntityName": None}]
