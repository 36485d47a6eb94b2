"""The Mastra-compatible REST API of the studio process (STUDIO-REST.md), one module a resource."""
