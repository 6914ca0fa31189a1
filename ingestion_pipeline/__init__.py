"""Document ingestion on PostgreSQL: a fenced, lease-based job queue orchestrated by Dagster."""

__version__ = "0.1.0"
