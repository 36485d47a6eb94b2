"""Token counting for Observational Memory's thresholds: text (tokenx), messages and attachments."""
