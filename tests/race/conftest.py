"""Race tests force each interleaving with several real connections and lock barriers
(observed through pg_blocking_pids) or lease timestamps set in the past; none relies on
a sleep for ordering. Tests taking the `schema` fixture run twice: on the pre-hardening
schema, where they assert the bug (docs/state-machine.md), and at head, where they assert the fix."""

# Their fixtures (`new_conn`, `open_connections`) are in tests/conftest.py, shared with tests/integration.
