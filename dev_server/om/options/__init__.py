"""How Observational Memory is configured: Mastra's options object, resolved, and its model choices."""
