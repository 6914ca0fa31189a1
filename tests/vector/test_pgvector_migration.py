"""Migration pgvector on each kind of server: what it adds where the extension can be
created, nothing elsewhere; drift checks pass on both and catch pgvector drift; migrating
again changes nothing; vectors embedded before it move into the vector column."""

from __future__ import annotations

import uuid

import pytest

from ingestion_pipeline.cli import main as ingest
from ingestion_pipeline.db import drift, vector_index
from ingestion_pipeline.db import migrate as migrator
from ingestion_pipeline.db.connection import connect
from ingestion_pipeline.db.vector_index import ensure_hnsw_index, index_name
from ingestion_pipeline.search.vector import vector_hits, vector_search_path
from tests.vector.corpus import DIMENSIONS, embed, index_folder, write_corpus

MIGRATION = "pgvector"


def drift_lines(url: str) -> list[str]:
    return drift.ledger_problems(url) + drift.differences(drift.load_manifest(), drift.catalog_manifest(url))


def pgvector_objects(url: str) -> dict[str, bool]:
    with connect(url) as conn:
        return conn.execute("""
            select exists (select from pg_extension where extname = 'vector') as extension,
                   exists (select from pg_attribute where attrelid = 'document_chunks'::regclass
                           and attname = 'embedding_vector') as column,
                   exists (select from pg_attribute where attrelid = 'committed_document_chunks'::regclass
                           and attname = 'embedding_vector') as view_column,
                   exists (select from pg_trigger where tgname = 'document_chunks_embedding_vector') as trigger,
                   exists (select from pg_proc where proname = 'document_chunks_embedding_vector') as function
        """).fetchone()


def test_without_pgvector_the_migration_changes_nothing(exact_db):
    assert set(pgvector_objects(exact_db.url).values()) == {False}
    manifest, actual = drift.load_manifest(), drift.catalog_manifest(exact_db.url)
    # The manifest's top level is the schema without pgvector: exactly this database.
    assert {kind: actual[kind] for kind in drift.KINDS} == {kind: manifest[kind] for kind in drift.KINDS}
    with connect(exact_db.url) as conn:
        applied = conn.execute(
            "select count(*) as n from ingest_schema_migrations where name = %s", (MIGRATION,)
        ).fetchone()
    assert applied["n"] == 1, "recorded as applied: a no-op, not skipped"


def test_with_pgvector_the_migration_adds_the_column_trigger_and_view_column(pgvector_db):
    assert set(pgvector_objects(pgvector_db.url).values()) == {True}
    with connect(pgvector_db.url) as conn:
        column = conn.execute(
            "select format_type(atttypid, atttypmod) as type from pg_attribute "
            "where attrelid = 'document_chunks'::regclass and attname = 'embedding_vector'"
        ).fetchone()
    assert column["type"] == "vector", "untyped: the dimension is the embedder's"


def test_drift_check_passes_on_both_kinds_with_and_without_the_index(any_db, tmp_path):
    assert drift_lines(any_db.url) == []
    index_folder(any_db.url, write_corpus(tmp_path / "corpus", ["otters.txt"]))
    ensure_hnsw_index(any_db.url, DIMENSIONS)
    ensure_hnsw_index(any_db.url, 8)  # a second dimension: another index of the same pattern
    assert drift_lines(any_db.url) == []


def test_drift_catches_pgvector_drift(pgvector_db):
    with connect(pgvector_db.url) as conn:
        conn.execute("drop trigger document_chunks_embedding_vector on document_chunks")
        # Named like a dimension index but built differently (L2 distance): not configuration.
        conn.execute(
            f"create index {index_name(32)} on index_generations using hnsw "
            "((mean_embedding::vector(32)) vector_l2_ops) where cardinality(mean_embedding) = 32"
        )
    lines = drift_lines(pgvector_db.url)
    assert "missing trigger document_chunks.document_chunks_embedding_vector" in lines
    assert any(line.startswith(f"unexpected index {index_name(32)} (") for line in lines), lines
    assert len(lines) == 2, lines


def test_migrating_again_changes_nothing(any_db, monkeypatch, capsys):
    ensure_hnsw_index(any_db.url, DIMENSIONS)
    before = drift.catalog_manifest(any_db.url)
    assert migrator.migrate(any_db.url).newly_applied == []
    monkeypatch.setenv("INGEST_EMBEDDER", "hash")  # HashEmbedder(): 64 dimensions
    for _ in range(2):
        capsys.readouterr()
        assert ingest(["db", "migrate", "--database-url", any_db.url]) == 0
        out = capsys.readouterr().out
        assert "database is up to date" in out
        if any_db.path == "pgvector":
            assert f"vector index: {index_name(DIMENSIONS)} present" in out
        else:
            assert "vector search: exact" in out
    assert drift.catalog_manifest(any_db.url) == before


def test_cli_migrate_builds_the_index_and_status_names_the_path(any_db, monkeypatch, capsys):
    monkeypatch.setenv("INGEST_EMBEDDER", "hash")
    capsys.readouterr()
    assert ingest(["db", "migrate", "--database-url", any_db.url]) == 0
    migrated = capsys.readouterr().out
    assert ingest(["db", "status", "--database-url", any_db.url]) == 0
    status = capsys.readouterr().out.splitlines()[-1]
    if any_db.path == "pgvector":
        assert (
            f"vector index: {index_name(DIMENSIONS)} built (HNSW of the documents' mean vectors, inner product, "
            "64 dimensions)\n" in migrated
        )
        assert status.startswith("vector search: pgvector 0.") and index_name(DIMENSIONS) in status
    else:
        assert status.startswith("vector search: exact"), status


def test_migrate_drops_the_chunk_vectors_index_of_earlier_releases(pgvector_db, monkeypatch, capsys):
    """Releases before migration 20261206000400 indexed every chunk vector; nothing searches
    that index now, and each chunk written paid an insert into it: `ingest db migrate` drops it
    (CONCURRENTLY) beside building the means' index, and the database then matches the manifest."""
    with connect(pgvector_db.url) as conn:  # as those releases built it
        conn.execute(
            "create index document_chunks_embedding_hnsw_64 on document_chunks using hnsw "
            "((embedding_vector::vector(64)) vector_cosine_ops) where vector_dims(embedding_vector) = 64"
        )
    assert any(
        line.startswith("unexpected index document_chunks_embedding_hnsw_64") for line in drift_lines(pgvector_db.url)
    )
    monkeypatch.setenv("INGEST_EMBEDDER", "hash")
    capsys.readouterr()
    assert ingest(["db", "migrate", "--database-url", pgvector_db.url]) == 0
    assert "; dropped the chunk vectors' document_chunks_embedding_hnsw_64 (unused)\n" in capsys.readouterr().out
    with connect(pgvector_db.url) as conn:
        assert [row["name"] for row in vector_index.hnsw_indexes(conn)] == [index_name(DIMENSIONS)]
    assert drift_lines(pgvector_db.url) == []


def test_vectors_embedded_before_the_migration_move_into_the_vector_column(vector_server, tmp_path):
    files = migrator.discover(migrator.default_migrations_dir())
    before = files[[f.name for f in files].index(MIGRATION) - 1].version
    name = f"ingest_vb_{uuid.uuid4().hex[:12]}"
    url = vector_server.create(name)
    try:
        migrator.migrate(url, target=before)
        index_folder(url, write_corpus(tmp_path / "corpus", ["otters.txt", "tea.txt"]))
        with connect(url) as conn:
            old = {
                (r["document_id"], r["ordinal"]): r["embedding"]
                for r in conn.execute("select document_id, ordinal, embedding from document_chunks")
            }
        assert old and all(vector is not None for vector in old.values())

        migrator.migrate(url)
        with connect(url) as conn:
            assert vector_search_path(conn) == "pgvector"
            moved = conn.execute(
                "select document_id, ordinal, embedding, embedding_vector::real[] as vector from document_chunks"
            ).fetchall()
            assert {(r["document_id"], r["ordinal"]) for r in moved} == set(old)
            for row in moved:
                assert row["embedding"] is None
                assert row["vector"] == pytest.approx(old[(row["document_id"], row["ordinal"])], abs=1e-7)
            assert vector_hits(conn, embed("otter river"), 1, embedder="hash")[0].source_name == "otters.txt"
    finally:
        vector_server.drop(name)
