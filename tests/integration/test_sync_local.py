"""`ingest sync` of a local folder (issue 32): new, changed, unchanged and vanished files;
no bytes read when nothing changed; deletes only from a complete, non-empty listing."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ingestion_pipeline.cli import main as ingest
from ingestion_pipeline.db.rpc import IngestionRpc
from ingestion_pipeline.operations.enqueue import enqueue_paths
from ingestion_pipeline.operations.listing import ListingFailed
from ingestion_pipeline.operations.sync import SyncOptions, sync_source
from ingestion_pipeline.worker import Worker
from tests.default_embedder import default_embedder  # noqa: F401 - autouse: sync, then search as users do


def write(folder: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)


@pytest.fixture
def folder(tmp_path) -> Path:
    root = tmp_path / "share"
    write(
        root,
        {
            "alpha.md": "# Alpha\n\nThe alpha heron waits by the reeds.\n",
            "beta.txt": "The beta heron eats a silver fish.\n",
            "deeper/gamma.md": "# Gamma\n\nThe gamma heron sleeps standing.\n",
            ".hidden.txt": "never synced",
        },
    )
    return root


def sync(pool, folder, on_entry=None, **options):
    options = SyncOptions(collection="share", max_bytes=100_000, **options)
    return sync_source(pool, str(folder), options, on_entry=on_entry)


def counts(report) -> dict[str, int]:
    return {name: n for name, n in report.counts.items() if n}


def found(db_url: str, capsys, words: str) -> list[str]:
    capsys.readouterr()
    assert ingest(["search", words, "--collection", "share", "--json", "--database-url", db_url]) == 0
    return sorted(Path(hit["source_uri"]).name for hit in json.loads(capsys.readouterr().out))


def test_a_folder_followed_through_new_changed_and_deleted_files(pool, settings, folder, db_url, capsys):
    first = sync(pool, folder)
    assert counts(first) == {"new": 3}
    Worker(pool, settings).run(drain=True)
    assert found(db_url, capsys, "heron") == ["alpha.md", "beta.txt", "gamma.md"]

    again = sync(pool, folder)
    assert counts(again) == {"unchanged": 3} and again.bytes_read == 0 and again.batch_id is None

    (folder / "alpha.md").write_text("# Alpha\n\nThe alpha egret has flown to the sea.\n")
    (folder / "beta.txt").unlink()
    write(folder, {"delta.txt": "The delta heron is new here.\n"})
    changed = sync(pool, folder)
    assert counts(changed) == {"changed": 1, "deleted": 1, "new": 1, "unchanged": 1}
    Worker(pool, settings).run(drain=True)
    assert found(db_url, capsys, "heron") == ["delta.txt", "gamma.md"]  # beta gone, alpha's old text gone
    assert found(db_url, capsys, "silver fish") == []
    assert found(db_url, capsys, "egret") == ["alpha.md"]


def test_a_folder_enqueued_before_syncs_without_reading_a_byte(pool, folder, db_url, capsys):
    capsys.readouterr()
    assert ingest(["enqueue", str(folder), "--collection", "share", "--database-url", db_url]) == 0
    report = sync(pool, folder)
    assert counts(report) == {"unchanged": 3} and report.bytes_read == 0


def test_a_touched_file_is_read_once_then_not_again(pool, folder):
    sync(pool, folder)
    stat = (folder / "beta.txt").stat()
    os.utime(folder / "beta.txt", (stat.st_atime, stat.st_mtime + 60))
    touched = sync(pool, folder)
    assert counts(touched) == {"unchanged": 3} and touched.bytes_read == (folder / "beta.txt").stat().st_size
    assert sync(pool, folder).bytes_read == 0


def test_files_whose_batch_was_cancelled_are_requeued_unread_and_a_failed_one_is_not(
    pool, conn, settings, folder, db_url, capsys
):
    write(folder, {"broken.txt": "a NUL byte makes it binary \x00"})
    first = sync(pool, folder)
    assert counts(first) == {"new": 4}
    assert IngestionRpc(pool).cancel_batch(first.batch_id).cancelled == 4  # before any build
    (folder / "broken.txt").unlink()
    write(folder, {"broken.txt": "fails again \x00"})

    assert counts(sync(pool, folder, dry_run=True)) == {"requeued": 3, "changed": 1}
    again = sync(pool, folder)
    assert counts(again) == {"requeued": 3, "changed": 1}
    assert again.bytes_read == (folder / "broken.txt").stat().st_size  # the requeued files are not read
    Worker(pool, settings).run(drain=True)
    assert found(db_url, capsys, "heron") == ["alpha.md", "beta.txt", "gamma.md"]
    # the broken file's latest version failed for good: unchanged, not queued at every sync
    status = "select status from documents where source_key = %s and deleted_at is null"
    assert conn.execute(status, ((folder / "broken.txt").as_uri(),)).fetchone()["status"] == "failed"
    assert counts(sync(pool, folder)) == {"unchanged": 4}


def test_dry_run_reads_and_writes_nothing(pool, conn, folder):
    sync(pool, folder)
    (folder / "beta.txt").unlink()
    write(folder, {"new.txt": "new"})
    before = conn.execute("select count(*) as n from ingestion_jobs").fetchone()["n"]
    report = sync(pool, folder, dry_run=True)
    assert sorted(report.changes) == [
        ((folder / "beta.txt").as_uri(), "deleted"),
        ((folder / "new.txt").as_uri(), "new"),
    ]
    assert report.bytes_read == 0
    assert conn.execute("select count(*) as n from ingestion_jobs").fetchone()["n"] == before
    assert conn.execute("select count(*) as n from documents where deleted_at is not null").fetchone()["n"] == 0


def test_no_delete_and_an_empty_listing_delete_nothing(pool, conn, folder):
    sync(pool, folder)
    (folder / "beta.txt").unlink()
    assert counts(sync(pool, folder, delete=False)) == {"unchanged": 2}

    for path in [folder / "alpha.md", folder / "deeper" / "gamma.md"]:
        path.unlink()
    empty = sync(pool, folder)
    assert counts(empty) == {} and "the listing is empty: 3 document(s)" in empty.deletes_skipped
    assert conn.execute("select count(*) as n from documents where deleted_at is null").fetchone()["n"] == 3
    assert counts(sync(pool, folder, allow_empty=True)) == {"deleted": 3}


def test_a_subfolder_that_cannot_be_listed_fails_alone_and_keeps_its_documents(pool, conn, folder, monkeypatch):
    """A subfolder that cannot be read (as a permission error would, which root never meets)."""
    sync(pool, folder)
    (folder / "beta.txt").unlink()
    real_scandir = os.scandir
    blocked = str(folder / "deeper")

    def scandir(path="."):
        if os.fspath(path) == blocked:
            raise PermissionError(13, "Permission denied", blocked)
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    report = sync(pool, folder)
    assert counts(report) == {"unchanged": 1, "deleted": 1, "failed": 1}
    assert report.failures == [((folder / "deeper").as_uri(), "folder not listed: Permission denied")]
    kept = "select count(*) as n from documents where deleted_at is null and source_key like %s"
    assert conn.execute(kept, ((folder / "deeper").as_uri() + "/%",)).fetchone()["n"] == 1


def test_the_root_that_cannot_be_listed_deletes_nothing(pool, conn, folder, monkeypatch):
    sync(pool, folder)
    real_scandir = os.scandir

    def scandir(path="."):
        if os.path.abspath(os.fspath(path)) == str(folder):
            raise PermissionError(13, "Permission denied", str(folder))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    with pytest.raises(ListingFailed, match=r"listing .*share failed: Permission denied"):
        sync(pool, folder)
    assert conn.execute("select count(*) as n from documents where deleted_at is not null").fetchone()["n"] == 0


def test_a_missing_source_is_refused_in_one_line(db_url, tmp_path, capsys):
    capsys.readouterr()
    assert ingest(["sync", str(tmp_path / "nowhere"), "--database-url", db_url]) == 1
    err = capsys.readouterr().err
    assert err.startswith("ingest: error:") and "no such folder" in err and len(err.splitlines()) == 1


def test_files_over_the_limit_fail_alone(pool, folder):
    write(folder, {"big.txt": "x" * 200_000})
    report = sync(pool, folder)
    assert counts(report) == {"new": 3, "failed": 1}
    assert report.failures[0][0].endswith("big.txt") and "over the 100000 limit" in report.failures[0][1]


def test_the_cli_prints_the_counts(db_url, folder, capsys):
    capsys.readouterr()
    assert ingest(["sync", str(folder), "--collection", "share", "--database-url", db_url]) == 0
    out = capsys.readouterr().out
    assert "new  changed  unchanged  requeued  retried  deleted  failed" in out and "collection 'share'" in out


def test_a_file_enqueued_while_the_sync_lists_is_not_deleted(pool, conn, folder, settings):
    """Enqueued by someone else after the listing passed its folder: not the pass's to delete."""
    sync(pool, folder)
    late = folder / "late.txt"

    def enqueue_behind_the_listing(key: str, counts) -> None:
        if not late.exists():
            late.write_text("written after the listing passed")
            enqueue_paths(pool, [late], max_bytes=settings.max_file_bytes, collection="share")
            late.unlink()  # the listing already passed it: the pass never sees it

    report = sync(pool, folder, on_entry=enqueue_behind_the_listing)
    assert report.counts["deleted"] == 0
    assert conn.execute("select count(*) as n from documents where deleted_at is not null").fetchone()["n"] == 0
    assert counts(sync(pool, folder)) == {"unchanged": 3, "deleted": 1}  # the next pass judges it


def test_a_broken_link_is_reported_and_keeps_what_was_under_it(pool, conn, folder, tmp_path, db_url, capsys):
    (tmp_path / "nas").mkdir()
    write(tmp_path / "nas", {"archive.txt": "kept on the share"})
    (folder / "archive").symlink_to(tmp_path / "nas", target_is_directory=True)
    assert counts(sync(pool, folder)) == {"new": 4}
    (tmp_path / "nas" / "archive.txt").unlink()
    (tmp_path / "nas").rmdir()  # the share is gone: the link dangles
    (folder / "dangling.txt").symlink_to(tmp_path / "nowhere.txt")
    write(folder, {"later.txt": "The late heron arrives."})
    report = sync(pool, folder)
    assert counts(report) == {"new": 1, "unchanged": 3, "failed": 2}
    assert sorted(key.rsplit("/", 1)[-1] for key, _ in report.failures) == ["archive", "dangling.txt"]
    assert all(reason.startswith("a link to nothing") for _, reason in report.failures)
    assert conn.execute("select count(*) as n from documents where deleted_at is not null").fetchone()["n"] == 0

    capsys.readouterr()  # `ingest enqueue` of the folder: the broken entries passed over, the rest enqueued
    assert ingest(["enqueue", str(folder), "--collection", "share", "--database-url", db_url]) == 0
    err = capsys.readouterr().err
    assert "ingest: skipped" in err and "dangling.txt: a link to nothing" in err


def test_a_touched_file_whose_version_failed_is_not_queued_again(pool, conn, settings, folder):
    write(folder, {"broken.txt": "a NUL byte makes it binary \x00"})
    sync(pool, folder)
    Worker(pool, settings).run(drain=True)
    key = (folder / "broken.txt").as_uri()
    jobs = "select count(*) as n from ingestion_jobs j join documents d on d.id = j.document_id where d.source_key = %s"
    before = conn.execute(jobs, (key,)).fetchone()["n"]
    stat = (folder / "broken.txt").stat()
    os.utime(folder / "broken.txt", (stat.st_atime, stat.st_mtime + 60))
    touched = sync(pool, folder)
    assert counts(touched) == {"unchanged": 4}  # not `retried`: a failed version stays failed
    assert conn.execute(jobs, (key,)).fetchone()["n"] == before
    assert sync(pool, folder).bytes_read == 0  # the new time was recorded


@pytest.mark.parametrize("url", ["ftp://127.0.0.1:1/x", "nope://host/x"])
def test_a_source_that_cannot_be_reached_is_one_line(db_url, url, capsys):
    capsys.readouterr()
    assert ingest(["sync", url, "--database-url", db_url]) == 1
    err = capsys.readouterr().err
    assert err.startswith("ingest: error:") and len(err.splitlines()) == 1 and "Traceback" not in err


def test_a_file_url_with_a_host_is_refused(pool, folder):
    with pytest.raises(ListingFailed, match="not a host"):
        sync_source(pool, f"file://server{folder}", SyncOptions(collection="share", max_bytes=100))
    assert counts(sync_source(pool, folder.as_uri(), SyncOptions(collection="share", max_bytes=100_000))) == {"new": 3}


@pytest.mark.parametrize("as_json", [False, True])
def test_a_sync_with_a_failed_entry_says_why_it_exits_1_in_one_stderr_line(db_url, folder, tmp_path, capsys, as_json):
    """Exit 1 means an entry failed and the rest of the pass is done: one line on stderr says
    so, with the first entry and its reason, also under --json (whose stdout stays JSON)."""
    command = ["sync", str(folder), "--collection", "share", "--database-url", db_url, *(["--json"] if as_json else [])]
    assert ingest(command) == 0  # the collection exists: no line saying it was created
    (folder / "dangling.txt").symlink_to(tmp_path / "nowhere.txt")
    capsys.readouterr()
    assert ingest(command) == 1
    out, err = capsys.readouterr()
    where = 'the JSON\'s "failures" lists it' if as_json else "the table lists it"
    assert err.splitlines() == [
        f"ingest: 1 entry failed, the rest of the pass is done (first: {(folder / 'dangling.txt').as_uri()}: "
        f"a link to nothing ({tmp_path / 'nowhere.txt'})); {where}"
    ]
    if as_json:
        assert [f["source_key"] for f in json.loads(out)["failures"]] == [(folder / "dangling.txt").as_uri()]
