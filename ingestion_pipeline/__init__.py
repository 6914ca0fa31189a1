"""Document ingestion on PostgreSQL: a fenced, lease-based job queue orchestrated by Dagster.

`from ingestion_pipeline import Index` is the Python API (docs/python.md). It is imported
on first use: the worker's parsing children and the commands import this package without
paying for it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ingestion_pipeline.api import Index

__version__ = "0.1.0"
__all__ = ["Index", "__version__"]


def __getattr__(name: str) -> Any:
    if name == "Index":
        from ingestion_pipeline.api import Index

        return Index
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
