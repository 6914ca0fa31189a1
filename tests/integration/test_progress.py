"""The progress bars a user sees on a terminal: `ingest work` shows documents done of the
queue's open jobs, the time left and the failures so far; `ingest enqueue` files of the
files found; `ingest sync` what became of the files listed so far. The commands run with
their standard error on a pseudo-terminal, as in a shell (issue 48)."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import struct
import subprocess
import sys
import termios
from pathlib import Path

from ingestion_pipeline.cli.progress import WorkProgress
from ingestion_pipeline.db.rpc import IngestionRpc
from ingestion_pipeline.operations.enqueue import enqueue_paths
from ingestion_pipeline.worker import Worker
from tests.search_server_off import SEARCH_SERVER_OFF

INGEST = Path(sys.executable).parent / "ingest"


def on_a_terminal(cwd: Path, db_url: str, *args: str) -> str:
    """Run `ingest ARGS` with stderr on a 120-column pseudo-terminal: the bar's last drawing."""
    env = {
        k: v for k, v in os.environ.items() if k.upper() != "DATABASE_URL" and not k.upper().startswith("INGEST_")
    } | SEARCH_SERVER_OFF
    env.update(DATABASE_URL=db_url, INGEST_EMBEDDER="hash", INGEST_PARSE_PROCESSES="1")
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    with subprocess.Popen(
        [str(INGEST), *args], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=slave, text=True
    ) as process:
        os.close(slave)
        screen = b""
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the command closed its end of the terminal
                break
            if not chunk:
                break
            screen += chunk
        stdout = process.stdout.read() if process.stdout else ""
        assert process.wait(timeout=120) == 0, screen.decode(errors="replace")
    os.close(master)
    # tqdm redraws its line after a carriage return: the last drawing is what stays.
    drawn = [part for part in re.split(r"[\r\n]", screen.decode(errors="replace")) if f"{args[0]}: " in part]
    assert stdout, "the command's report goes to stdout, apart from the bar"
    return drawn[-1] if drawn else screen.decode(errors="replace")


def test_work_shows_done_of_the_queue_time_left_and_failures(tmp_path, db_url):
    docs = tmp_path / "docs"
    docs.mkdir()
    for n in range(4):
        (docs / f"note-{n}.md").write_text(f"# Note {n}\n\nLanterns and harbours, note {n}.")
    blob = tmp_path / "blob.bin"  # no format: fails for good (named, since a folder skips it)
    blob.write_bytes(bytes(range(256)) * 8)
    enqueued = on_a_terminal(tmp_path, db_url, "enqueue", str(docs), str(blob))
    assert re.search(r"enqueue: 100%\|.*\| 5/5 \[", enqueued), enqueued

    worked = on_a_terminal(tmp_path, db_url, "work", "--drain")
    # done/total, elapsed<left, rate, then the failures
    assert re.search(r"work: 100%\|.*\| 5/5 \[\d\d:\d\d<00:00, .*(doc/s|s/doc), failed=1\]", worked), worked


def test_sync_shows_what_became_of_the_files_so_far(tmp_path, db_url):
    share = tmp_path / "share"
    share.mkdir()
    for n in range(3):
        (share / f"bird-{n}.txt").write_text(f"bird {n}")
    synced = on_a_terminal(tmp_path, db_url, "sync", str(share))
    assert re.search(r"sync: 3file .*new=3, failed=0\]", synced), synced


def test_the_total_follows_what_is_enqueued_while_the_worker_drains(pool, settings, tmp_path, capsys):
    first = tmp_path / "first"
    first.mkdir()
    for n in range(2):
        (first / f"a-{n}.txt").write_text(f"first wave {n}")
    enqueue_paths(pool, [first], max_bytes=settings.max_file_bytes)
    progress = WorkProgress(IngestionRpc(pool), draw=True, refresh_seconds=0)
    assert progress.totals == [2]  # the queue's open jobs when the bar starts

    later = tmp_path / "later"
    later.mkdir()
    for n in range(3):
        (later / f"b-{n}.txt").write_text(f"second wave {n}")

    def enqueue_more_after_the_first(result) -> None:
        if not progress.outcomes:
            enqueue_paths(pool, [later], max_bytes=settings.max_file_bytes)
        progress(result)

    try:
        Worker(pool, settings, parse_processes=0).run(drain=True, on_result=enqueue_more_after_the_first)
    finally:
        progress.close()
    assert max(progress.totals) >= 5 and progress.totals[-1] == 5
    assert (progress.bar.n, progress.bar.total) == (5, 5)
    assert "5/5" in capsys.readouterr().err
