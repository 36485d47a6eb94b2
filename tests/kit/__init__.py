"""The shared test kit: what test modules import instead of copying from one another.

- ``servers``: one factory for gateway and studio servers, as subprocesses or in-process
  apps, with one handle shape (the conftest's ``servers`` / ``module_servers`` fixtures,
  ``serve``, ``server_fixture``).
- ``chat`` / ``ui_stream``: chat turns read in Python, and the real ``ai`` package's judge
  (``judge``) for tests whose subject is the wire format.
- ``builders``: UI messages and parts, stored messages, seeded threads.
- ``om`` / ``om_agents``: Observational Memory constants, stream and record readers, agents.
- ``traces``, ``compose``, ``cli``, ``studio_ui``: observability, the compose topology,
  ``python -m dev_server`` as a command, the real Studio in chromium.
"""
