"""Database layer: embedded server, connections, migrations and the typed RPC client."""
