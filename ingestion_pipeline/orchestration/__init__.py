"""The Dagster layer: thin wrappers that call the worker and the RPCs."""
