"""The checks on the index's vectors: vectors missing (documents indexed with no embedder while one is
configured), mixed (more than one embedder among the live generations, or one that is not
the configured one), and the pgvector index of the configured dimension absent."""

from __future__ import annotations

from ingestion_pipeline.db.connection import connect
from ingestion_pipeline.db.embedders import IndexEmbedder, index_embedders
from ingestion_pipeline.db.vector_index import HNSW_MAX_DIMENSIONS, hnsw_indexes, index_name, vector_column
from ingestion_pipeline.errors import IngestError
from ingestion_pipeline.health.check import IndexCheck
from ingestion_pipeline.processing import EmbedderRecord, embedder_from_settings, embedder_record
from ingestion_pipeline.settings import Settings

REINDEX = "`ingest reindex --embeddings`"
NAMES = ("vectors_present", "one_embedder", "vector_index_present")


def vector_checks(url: str, settings: Settings) -> list[IndexCheck]:
    """The three checks, in NAMES order; each fails with the reason when the embedder's
    settings are bad."""
    try:
        record = embedder_record(embedder_from_settings(settings), with_version=False)
    except IngestError as exc:
        return [IndexCheck(name, False, f"could not check: {exc}") for name in NAMES]
    with connect(url) as conn:
        index = index_embedders(conn)
        column = vector_column(conn)
        valid = {row["name"]: bool(row["valid"]) for row in hnsw_indexes(conn)} if column else {}
    setting = f"INGEST_EMBEDDER={settings.embedder}"
    return [
        _missing(index, record, setting),
        _mixed(index, record, setting),
        _vector_index(record, column is not None, valid),
    ]


def _missing(index: list[IndexEmbedder], record: EmbedderRecord, setting: str) -> IndexCheck:
    missing = sum(entry.documents for entry in index if entry.without_vectors)
    if not record.makes_vectors:
        return IndexCheck("vectors_present", True, f"{setting}: no vectors expected", {"without_vectors": missing})
    if not missing:
        return IndexCheck("vectors_present", True, "every indexed document has vectors", {"without_vectors": 0})
    return IndexCheck(
        "vectors_present",
        False,
        f"vectors missing: {missing} document(s) indexed with no embedder while {setting} makes vectors "
        f"({record.describe()}); vector search does not find them: {REINDEX} embeds them",
        {"without_vectors": missing},
    )


def _mixed(index: list[IndexEmbedder], record: EmbedderRecord, setting: str) -> IndexCheck:
    made = [entry for entry in index if not entry.without_vectors]
    kinds = {(entry.name, entry.dimensions if entry.recorded else None) for entry in made}
    shown = ", ".join(f"{entry.describe()}: {entry.documents} document(s)" for entry in made[:3])
    metadata: dict[str, int | str] = {"embedders": len(kinds), "made_by": shown}
    if len(kinds) > 1:
        return IndexCheck(
            "one_embedder",
            False,
            f"vectors mixed: the live documents' vectors were made by {len(kinds)} embedders ({shown}); a query "
            f"finds by vector only those of its own embedder: {REINDEX} re-embeds the others with {setting}",
            metadata,
        )
    if made and record.makes_vectors and not made[0].matches(record.name, record.dimensions):
        return IndexCheck(
            "one_embedder",
            False,
            f"vectors of another embedder: the index's were made by {shown} but {setting} makes "
            f"{record.describe()}; vector and hybrid searches are refused: {REINDEX} re-embeds them",
            metadata,
        )
    return IndexCheck("one_embedder", True, f"one embedder: {shown}" if made else "no vectors in the index", metadata)


def _vector_index(record: EmbedderRecord, pgvector: bool, valid: dict[str, bool]) -> IndexCheck:
    """The index `ingest db migrate` builds: the configured embedder's dimension."""
    dimensions = record.dimensions if record.makes_vectors else None
    if not pgvector:
        return IndexCheck("vector_index_present", True, "no pgvector on this database: vector search is exact")
    if dimensions is None:
        return IndexCheck(
            "vector_index_present", True, "no vector dimension to index (the configured embedder makes no vectors)"
        )
    if dimensions > HNSW_MAX_DIMENSIONS:
        return IndexCheck(
            "vector_index_present",
            True,
            f"no vector index for {dimensions} dimensions (HNSW indexes at most {HNSW_MAX_DIMENSIONS}): "
            "vector search scans every document's mean vector",
        )
    name = index_name(dimensions)
    if valid.get(name):
        return IndexCheck("vector_index_present", True, f"vector index {name} present", {"index": name})
    state = "INVALID" if name in valid else "absent"
    return IndexCheck(
        "vector_index_present",
        False,
        f"vector index {state}: {name} (HNSW, {dimensions} dimensions) is {state}, so vector search over more than "
        "2,000 documents scans every document's mean vector: `ingest db migrate` builds it for the configured "
        "embedder's dimension",
        {"index": name},
    )
