"""The operator's actions, shared by the `ingest` commands and the Dagster jobs: enqueue
files (`enqueue`), delete documents, cancel batches and retry failed jobs (`lifecycle`),
re-index documents (`reindex`). Each calls the RPCs (`db/rpc/`); the state changes are the
database's."""
