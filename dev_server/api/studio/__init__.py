"""The Mastra-compatible REST API of the studio process (Mastra's Studio REST contract), one module a resource."""
