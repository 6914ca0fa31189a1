"""Dagster resources: the pipeline's database and the processing options."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import dagster as dg
import psycopg
from psycopg.rows import DictRow
from psycopg_pool import ConnectionPool

from ingestion_pipeline.db.connection import connect, resolve_database_url
from ingestion_pipeline.db.ready import migrated_pool, require_migrated
from ingestion_pipeline.db.rpc import IngestionRpc
from ingestion_pipeline.processing import ChunkingOptions, Embedder, chunking_from_settings, embedder_from_settings
from ingestion_pipeline.settings import Settings, load_settings


# Dagster's resources subclass ConfigurableResource unparameterized (its documented form): a
# type argument would have pydantic build a parametrized subclass at import.
class DatabaseResource(dg.ConfigurableResource):  # type: ignore[type-arg]
    """The ingestion database (not Dagster's own storage). Unset fields come from the
    environment settings: DATABASE_URL, or the embedded server under INGEST_DATA_DIR."""

    database_url: str | None = None
    pool_max_size: int | None = None

    def settings(self) -> Settings:
        overrides = {"database_url": self.database_url, "pool_max_size": self.pool_max_size}
        return load_settings(**{k: v for k, v in overrides.items() if v is not None})

    def url(self) -> str:
        return resolve_database_url(self.settings())

    @contextmanager
    def pool(self) -> Iterator[ConnectionPool[psycopg.Connection[DictRow]]]:
        """A pool for a drain run; refuses a database with pending migrations."""
        with migrated_pool(self.settings()) as pool:
            yield pool

    @contextmanager
    def rpc(self) -> Iterator[IngestionRpc]:
        """One connection, for the cheap calls of sensors, checks and the janitor; refuses a
        database with pending migrations (IngestError naming `ingest db migrate`)."""
        settings = self.settings()
        url = resolve_database_url(settings)
        require_migrated(url)
        conn: psycopg.Connection[DictRow] = connect(url, timeout=settings.connect_timeout_seconds)
        with conn:
            yield IngestionRpc(conn, stale_after_seconds=settings.stale_after_seconds)


class ProcessingResource(dg.ConfigurableResource):  # type: ignore[type-arg]  # as DatabaseResource
    """How documents are cut and embedded. `embedder` unset: INGEST_EMBEDDER; the embedder's
    own settings (INGEST_OPENAI_*, the key among them) come from the environment only, never
    from run config, which the UI shows. The chunk sizes unset: INGEST_CHUNK_CHARS and
    INGEST_CHUNK_OVERLAP_CHARS, so a drain run cuts as `ingest work` does."""

    embedder: str | None = None
    max_chunk_chars: int | None = None
    chunk_overlap_chars: int | None = None

    def make_embedder(self, settings: Settings) -> Embedder:
        return embedder_from_settings(settings, self.embedder)

    def chunking(self, settings: Settings) -> ChunkingOptions:
        default = chunking_from_settings(settings)
        return ChunkingOptions(
            max_chars=default.max_chars if self.max_chunk_chars is None else self.max_chunk_chars,
            overlap_chars=default.overlap_chars if self.chunk_overlap_chars is None else self.chunk_overlap_chars,
        )
