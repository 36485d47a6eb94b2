"""Observational Memory conformance: Mastra's real engine recorded on our conversations
(``recorder/``, Node), the traces (``traces/``), and their replay on our gateway with the
same scripted models and clock (``replay``), compared check by check (``checks``).
docs/om-conformance.md says how to read and extend it."""
