"""The Python API: `Index`, one object over a database that enqueues, syncs, drains the
queue, searches and shows documents, through the code the `ingest` commands run
(docs/python.md). Its results are the operations' own typed objects, exported here too."""

from ingestion_pipeline.db.models import BatchReport, DocumentSummary, DocumentVersion
from ingestion_pipeline.errors import (
    ConfigError,
    DatabaseUnavailable,
    IngestError,
    NearCollection,
    SchemaTooOld,
    UnknownCollection,
)
from ingestion_pipeline.operations.enqueue import EnqueuedFile, EnqueueReport
from ingestion_pipeline.operations.sources import SourceEnqueued
from ingestion_pipeline.operations.sync import SyncReport
from ingestion_pipeline.search import Hit, Passage, Reader, Section
from ingestion_pipeline.worker import JobResult, Outcome, WorkerReport

from .index import Index
from .results import Document, DocumentNotFound, RunReport

__all__ = [
    "BatchReport",
    "ConfigError",
    "DatabaseUnavailable",
    "Document",
    "DocumentNotFound",
    "DocumentSummary",
    "DocumentVersion",
    "EnqueueReport",
    "EnqueuedFile",
    "Hit",
    "Index",
    "IngestError",
    "JobResult",
    "NearCollection",
    "Outcome",
    "Passage",
    "Reader",
    "RunReport",
    "SchemaTooOld",
    "Section",
    "SourceEnqueued",
    "SyncReport",
    "UnknownCollection",
    "WorkerReport",
]
