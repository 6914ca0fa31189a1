"""`enqueue_paths` on any schema: the production one where the database has document
versions (…_document_versions.sql), else the content-addressed enqueue of the releases
before keys, in plain SQL (tests/sql/old_call_forms.sql): identical live bytes are one
document, a changed file is another. The race tests that run on a schema before that
migration, and the tests that index a corpus there, upload with it; `index_files` also
drains the upload with a worker whose client speaks that schema."""

from __future__ import annotations

import hashlib
import mimetypes
from pathlib import Path

from ingestion_pipeline.db.connection import make_pool
from ingestion_pipeline.operations.enqueue import (
    EnqueuedFile,
    EnqueueReport,
    collect_files,
    display_name,
    enqueue_paths,
    source_key_of,
)
from ingestion_pipeline.processing.embedding import Embedder
from ingestion_pipeline.settings import load_settings
from ingestion_pipeline.worker.loop import Worker
from ingestion_pipeline.worker.report import WorkerReport
from tests.any_schema_rpc import OLD_SQL, AnySchemaRpc


def enqueue_files(
    pool, paths, *, max_bytes: int, batch_name: str = "upload", max_attempts: int = 3, on_file=None, **kwargs
):
    if AnySchemaRpc(pool).has_versions:
        return enqueue_paths(
            pool,
            paths,
            max_bytes=max_bytes,
            batch_name=batch_name,
            max_attempts=max_attempts,
            on_file=on_file,
            **kwargs,
        )
    report = EnqueueReport(batch_id=None, batch_name=batch_name)
    for path in collect_files(paths, max_bytes):
        report.files.append(_enqueue_old(pool, Path(path), report, max_attempts))
        if on_file:
            on_file(report.files[-1])
    if report.batch_id is not None and not any(f.job_id for f in report.files):
        report.batch_status = AnySchemaRpc(pool).refresh_batch(report.batch_id).status
    return report


def index_files(url: str, paths, *, embedder: Embedder | None = None, **options) -> tuple[EnqueueReport, WorkerReport]:
    """Enqueue `paths` (enqueue_files' `options`) and drain them with the worker, on any schema."""
    settings = load_settings(database_url=url, retry_backoff_seconds=0, parse_processes=0)
    with make_pool(url, settings) as pool:
        report = enqueue_files(pool, paths, max_bytes=settings.max_file_bytes, **options)
        return report, Worker(pool, settings, embedder=embedder, rpc=AnySchemaRpc(pool)).run(drain=True)


def _enqueue_old(pool, path: Path, report: EnqueueReport, max_attempts: int) -> EnqueuedFile:
    content = path.read_bytes()
    sha256 = hashlib.sha256(content).hexdigest()
    name = display_name(path.name)
    with pool.connection() as conn, conn.transaction():
        rpc = AnySchemaRpc(conn)
        if report.batch_id is None:
            report.batch_id = rpc.create_batch(report.batch_name, {}).batch_id
        row = conn.execute(
            OLD_SQL["insert_document"],
            {
                "batch_id": report.batch_id,
                "source_name": name,
                "content_sha256": sha256,
                "byte_size": len(content),
                "mime_type": mimetypes.guess_type(name)[0],
            },
        ).fetchone()
        if row is None:  # identical live bytes: that document
            existing = conn.execute(OLD_SQL["find_live_document"], {"content_sha256": sha256}).fetchone()
            return EnqueuedFile(
                display_name(path), "unchanged", existing["id"], None, len(content), source_key_of(path), None
            )
        conn.execute(OLD_SQL["insert_document_source"], {"document_id": row["id"], "content": content})
        job = rpc.enqueue(row["id"], batch_id=report.batch_id, max_attempts=max_attempts)
        return EnqueuedFile(display_name(path), "new", row["id"], job.job_id, len(content), source_key_of(path), None)
