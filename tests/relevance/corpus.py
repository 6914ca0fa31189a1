"""The relevance corpus (tests/fixtures/relevance): project-written HTML pages of a database
operations manual and the queries, each with the page that answers it; the metrics are the
package's (ingestion_pipeline/search/evaluation.py), which bench/relevance.py uses too."""

from __future__ import annotations

from pathlib import Path

from ingestion_pipeline.cli.tables import render_table
from ingestion_pipeline.db.connection import make_pool
from ingestion_pipeline.operations.enqueue import enqueue_paths
from ingestion_pipeline.search.evaluation import Query, Ranked, load_judgments, rank_cell
from ingestion_pipeline.settings import load_settings
from ingestion_pipeline.worker import Worker

FOLDER = Path(__file__).resolve().parents[1] / "fixtures" / "relevance"
PAGES = FOLDER / "pages"
QUERIES = FOLDER / "queries.json"
KINDS = ("keyword", "topic", "question", "phrase", "exclude")


def load_queries(path: Path = QUERIES) -> list[Query]:
    return load_judgments(path)


def page_names() -> list[str]:
    return sorted(path.name for path in PAGES.glob("*.html"))


def index_pages(url: str) -> int:
    """Enqueue every page into the database at `url` as one batch and drain it with the
    worker (parsing in its threads: 41 small pages need no children). Returns the number of
    pages indexed; raises when one did not complete."""
    settings = load_settings(database_url=url, retry_backoff_seconds=0, parse_processes=0)
    with make_pool(url, settings) as pool:
        enqueued = enqueue_paths(pool, [PAGES], max_bytes=settings.max_file_bytes, batch_name="relevance corpus")
        report = Worker(pool, settings, label="relevance").run(drain=True)
    completed = report.counts["completed"]
    if completed != len(enqueued.files):
        raise RuntimeError(
            f"{completed} of {len(enqueued.files)} relevance pages indexed: "
            + "; ".join(r.message or "" for r in report.results if r.outcome.value != "completed")
        )
    return completed


def per_query_table(ranked: list[Ranked]) -> str:
    return render_table(
        ["rank", "kind", "query", "expected", "first result"],
        [
            [
                rank_cell(r.rank),
                r.query.kind,
                r.query.text,
                r.query.expected,
                "" if r.rank == 1 else (r.top or "(none)"),
            ]
            for r in ranked
        ],
    )
