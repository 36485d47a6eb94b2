"""dev-server: an agent gateway with durable conversation memory.

Importing this package does no work: the app is built by ``dev_server.factory.create_app``.
"""

__version__ = "0.1.0"
