"""Observability: spans, traces and logs; reads for the Studio, and (later) writers and OTLP."""
