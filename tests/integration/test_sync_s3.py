"""`ingest sync s3://…` through s3fs against a local S3 API over real HTTP (moto's server,
behind a proxy that injects listing faults: tests/s3server.py). The same path as a folder:
new, changed and deleted objects followed; an unchanged object is not read (its ETag and
size match); a listing that fails part-way or is denied deletes nothing."""

from __future__ import annotations

import json
from collections.abc import Iterator

import fsspec
import pytest

from ingestion_pipeline.cli import main as ingest
from ingestion_pipeline.operations.listing import ListingFailed
from ingestion_pipeline.operations.selection import Selection
from ingestion_pipeline.operations.sync import SyncOptions, sync_source
from ingestion_pipeline.worker import Worker
from tests.default_embedder import default_embedder  # noqa: F401 - autouse: sync, then search as users do
from tests.s3server import S3Server, reset, s3_server

BUCKET = "docs-bucket"
SOURCE = f"s3://{BUCKET}/team"


@pytest.fixture(scope="module")
def s3_module() -> Iterator[S3Server]:
    """One server for the module (it takes seconds to start), emptied for each test."""
    with s3_server() as server:
        yield server


@pytest.fixture
def s3(s3_module, monkeypatch) -> S3Server:
    reset(s3_module)
    for name, value in s3_module.env().items():
        monkeypatch.setenv(name, value)
    return s3_module


@pytest.fixture
def bucket(s3):
    fs = fsspec.filesystem("s3", skip_instance_cache=True, use_listings_cache=False)
    fs.mkdir(BUCKET)
    put(fs, "alpha.md", "# Alpha\n\nThe alpha heron waits by the reeds.\n")
    put(fs, "beta.txt", "The beta heron eats a silver fish.\n")
    put(fs, "deeper/gamma.md", "# Gamma\n\nThe gamma heron sleeps standing.\n")
    return fs


def put(fs, name: str, text: str) -> None:
    fs.pipe(f"{BUCKET}/team/{name}", text.encode())


def sync(pool, **options):
    return sync_source(pool, SOURCE, SyncOptions(collection="bucket", max_bytes=100_000, **options))


def counts(report) -> dict[str, int]:
    return {name: n for name, n in report.counts.items() if n}


def found(db_url: str, capsys, words: str) -> list[str]:
    capsys.readouterr()
    assert ingest(["search", words, "--collection", "bucket", "--json", "--database-url", db_url]) == 0
    return sorted(hit["source_uri"].removeprefix(SOURCE + "/") for hit in json.loads(capsys.readouterr().out))


def deleted(conn) -> int:
    return conn.execute("select count(*) as n from documents where deleted_at is not null").fetchone()["n"]


def test_a_bucket_prefix_followed_through_new_changed_and_deleted_objects(pool, settings, bucket, db_url, capsys):
    assert counts(sync(pool)) == {"new": 3}
    Worker(pool, settings).run(drain=True)
    assert found(db_url, capsys, "heron") == ["alpha.md", "beta.txt", "deeper/gamma.md"]

    again = sync(pool)
    assert counts(again) == {"unchanged": 3} and again.bytes_read == 0

    put(bucket, "alpha.md", "# Alpha\n\nThe alpha egret has flown to the sea.\n")
    bucket.rm(f"{BUCKET}/team/beta.txt")
    put(bucket, "delta.txt", "The delta heron is new here.\n")
    assert counts(sync(pool)) == {"changed": 1, "deleted": 1, "new": 1, "unchanged": 1}
    Worker(pool, settings).run(drain=True)
    assert found(db_url, capsys, "heron") == ["deeper/gamma.md", "delta.txt"]
    assert found(db_url, capsys, "silver fish") == []
    assert found(db_url, capsys, "egret") == ["alpha.md"]


def test_a_server_error_mid_listing_deletes_nothing(pool, conn, bucket, s3):
    sync(pool)
    bucket.rm(f"{BUCKET}/team/beta.txt")
    # the prefix is looked up (1) and listed (2); its subfolder answers 500
    s3.faults.listings_before_failure = 2
    with pytest.raises(ListingFailed, match=f"listing {SOURCE} failed"):
        sync(pool)
    assert deleted(conn) == 0
    s3.faults.clear()
    assert counts(sync(pool)) == {"unchanged": 2, "deleted": 1}


def test_throttling_mid_listing_deletes_nothing(pool, conn, bucket, s3):
    sync(pool)
    bucket.rm(f"{BUCKET}/team/beta.txt")
    s3.faults.listings_before_failure, s3.faults.failure_status = 2, 503
    with pytest.raises(ListingFailed):
        sync(pool)
    assert deleted(conn) == 0


def test_a_denied_subfolder_keeps_its_documents_and_says_where(pool, conn, bucket, s3, db_url, capsys):
    sync(pool)
    bucket.rm(f"{BUCKET}/team/beta.txt")
    s3.faults.denied_prefix = "team/deeper"
    capsys.readouterr()
    assert ingest(["sync", SOURCE, "--collection", "bucket", "--database-url", db_url]) == 1
    out = capsys.readouterr().out
    assert "failed:" in out and "team/deeper" in out, out
    assert deleted(conn) == 1  # beta.txt; what is under the denied prefix is kept


def test_an_empty_prefix_deletes_nothing_without_allow_empty(pool, conn, bucket):
    sync(pool)
    bucket.rm(f"{BUCKET}/team", recursive=True)  # S3 has no empty folders: the prefix is gone
    empty = sync(pool)
    assert counts(empty) == {} and "the listing is empty: 3 document(s)" in empty.deletes_skipped
    assert deleted(conn) == 0
    assert counts(sync(pool, allow_empty=True)) == {"deleted": 3}
    with pytest.raises(ListingFailed, match="no such folder or prefix"):
        sync_source(pool, "s3://no-such-bucket/team", SyncOptions(collection="bucket", max_bytes=100))


def test_a_bucket_gives_its_documents_and_globs_match_paths_below_the_prefix(pool, bucket):
    """Issue 61, item 2: as a folder's, a bucket's stylesheets and SVG are counted, not read,
    and a glob with `/` matches an object's path below the source's prefix."""
    put(bucket, "site/style.css", "body { color: red; }\n")
    put(bucket, "site/figure.svg", "<svg/>\n")
    report = sync(pool)
    assert counts(report) == {"new": 3} and str(report.passed_over) == "1 SVG image, 1 stylesheet"
    chosen = sync(pool, selection=Selection.of(include=["site/*"], exclude=["*.svg"]))
    assert sorted((key.removeprefix(SOURCE + "/"), change) for key, change in chosen.changes) == [
        ("alpha.md", "deleted"),  # no longer chosen: not the source's
        ("beta.txt", "deleted"),
        ("deeper/gamma.md", "deleted"),
        ("site/style.css", "new"),
    ]
    assert chosen.passed_over.by_kind() == {"file not included": 3, "excluded file": 1}
