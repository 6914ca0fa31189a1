"""The fault harness: worker processes drain tiny documents while a chaos loop SIGKILLs
them, terminates their backends, pauses them past the stale window (zombies), stalls one
job thread of a live worker past its lease (SIGUSR1: its lease is left out of the worker's
heartbeat statement while the process, its claim loop and its other leases keep going;
the thread then writes and commits as a zombie, tests/faults/worker_process.py) and
restarts them, SIGKILLs a worker that holds a job on its final attempt
(`final_attempt_kill`: the job can only be dead-lettered) and restarts the database
server under the fleet (`server_restart`: every pooled connection of every worker is left
dead and idle; on a server the harness must not restart, every backend of the database is
terminated instead), and a janitor runs alongside, its calls in a history of their own
(janitor.jsonl). The chaos also plays the operator (`delete_document`: a random document,
indexed, queued or, part of the time, one being built right now; `cancel_batch`: a random
import batch, part of the time one with open jobs; `retry_failed`: a bulk retry of the
failed jobs of a batch whose jobs are being acknowledged right now, of failed jobs of
several batches named by id, or of every failed job; `new_version`: new bytes for a
document under its key, as its source changed, part of the time one being built right now,
so the older version's job is superseded under its worker), its calls in a history of their
own (operator.jsonl), racing the workers' acknowledgements of the same batches and documents.
Every PERMANENT_FAILURE_EVERY-th document cannot be parsed (NUL bytes): its job fails at
once, each time it is retried, so the retries always have targets. At the end, once
everything drained, a last janitor pass runs the cleanup until it finds nothing more, so
no row of a deleted document is left for the checker. Before the run the harness installs
a test-only deletion audit in the scratch database (`install_deletion_audit`, not a
migration), which the checker reads.
Used by tests/faults (bounded) and tests/faults/soak.py."""

from __future__ import annotations

import hashlib
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import psycopg

from ingestion_pipeline.db import embedded
from ingestion_pipeline.db.connection import connect
from ingestion_pipeline.worker.errors import describe
from tests.any_schema_rpc import AnySchemaRpc
from tests.faults.forced import finished_jobs, force_faults, stalls_recorded, wait_for
from tests.faults.rpc_log import DEADLOCK, OPERATOR, HistoryFile, LoggedRpc, read_history, rolled_back
from tests.faults.sync_loop import COLLECTION as SYNC_COLLECTION
from tests.faults.sync_loop import MAX_ATTEMPTS as SYNC_MAX_ATTEMPTS
from tests.faults.sync_loop import SyncLoop, SyncStats
from tests.faults.sync_race import RaceLoop, RaceStats
from tests.faults.worker_process import FAULT_SETTINGS
from tests.helpers import enqueue_bytes

ROOT = Path(__file__).resolve().parents[2]
STALE = FAULT_SETTINGS["stale_after_seconds"]
FAULTS = (
    "kill",
    "terminate_backends",
    "pause",
    "stall",
    "final_attempt_kill",
    "server_restart",
    "delete_document",
    "cancel_batch",
    "retry_failed",
    "new_version",
)
OPERATOR_ACTIONS = ("delete_document", "cancel_batch", "retry_failed", "new_version")
# Every FINAL_ATTEMPT_EVERY-th document of a fault run is seeded with max_attempts=1: each of
# its claims is a final attempt (a kill, a pause or a stall under it ends in the dead letter).
FINAL_ATTEMPT_EVERY = 8
# Every PERMANENT_FAILURE_EVERY-th document (n % N == PERMANENT_FAILURE_OFFSET % N, unless
# it is a final-attempt one) holds NUL bytes: its parse fails (ProcessingError), so its job
# fails at once (stage `failed`, its document `failed`), on every attempt: the retries'
# targets. N is odd, so they fall in every batch (documents go to batches round-robin).
PERMANENT_FAILURE_EVERY = 15
PERMANENT_FAILURE_OFFSET = 5
BROKEN_MARK = "-broken"  # in the source name of such a document (doc-<n>-broken.txt)
JANITOR_HISTORY = "janitor.jsonl"
OPERATOR_HISTORY = "operator.jsonl"
# How a delete picks its document: one whose job is being built right now (this share of
# the deletes, when there is one), one whose job is still queued (this share), else any
# document at all (indexed, failed, queued, cancelled or already deleted).
DELETE_IN_FLIGHT_SHARE = 0.4
DELETE_QUEUED_SHARE = 0.2
# How a cancel picks its batch: one with open jobs this often (when there is one), else any.
CANCEL_OPEN_SHARE = 0.5
# How a new version picks its document: one being built right now this often (when there
# is one), else any live keyed one (never a broken one, nor one with a max_attempts=1 job:
# the runs' accounting of those stays as it is).
NEW_VERSION_IN_FLIGHT_SHARE = 0.5
# The key of the n-th seeded document (seed_documents, on schemas with document versions).
SOURCE_KEY_PREFIX = "fault://docs/"
NEW_VERSION_MAX_ATTEMPTS = 10
# A new version is followed at once by up to this many more of the same document, part of
# the time (versions in quick succession: each supersedes the one before, pending or not).
NEW_VERSIONS_AT_ONCE = 3
# How a retry picks its targets, each mode as often: the failed jobs of a batch with jobs
# in flight (`batch_in_flight`), failed jobs of several batches by id (`jobs`: up to
# RETRY_JOBS_PER_BATCH of each of up to RETRY_BATCHES batches, those with jobs in flight
# first), every failed job (`all`).
RETRY_MODES = ("batch_in_flight", "jobs", "all")
RETRY_BATCHES = 3
RETRY_JOBS_PER_BATCH = 3
# The final cleanup: calls of this size until one deletes nothing (at most this many calls).
FINAL_CLEANUP_LIMIT = 500
FINAL_CLEANUP_MAX_CALLS = 200
WORDS = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november".split()


# The deletion audit: every generation and every artifact row deleted, with the job and
# token that began the generation and the open job of its document at that moment (the
# statement-level trigger runs after the delete, on a fresh snapshot: a claim committed
# while the delete ran is seen). Statement triggers over transition tables: one insert per
# delete statement and generation, whatever it removes. The lease_token columns are read
# through to_jsonb so the audit also runs on the schemas before lease tokens.
AUDIT_SQL = """
create table if not exists public.fault_audit_deletions (
    id             bigint generated always as identity primary key,
    relation       text not null,
    generation_id  uuid,
    document_id    uuid,
    job_id         uuid,
    generation_status text,
    generation_token  bigint,
    row_count      bigint not null,
    open_job_id    uuid,
    open_job_status text,
    open_job_token bigint,
    deleted_at     timestamptz not null default clock_timestamp()
);
create or replace function public.fault_audit_generation_deletes() returns trigger
language plpgsql set search_path = pg_catalog, pg_temp as $$
begin
    insert into public.fault_audit_deletions (relation, generation_id, document_id, job_id, generation_status,
                                              generation_token, row_count, open_job_id, open_job_status,
                                              open_job_token)
    select TG_TABLE_NAME, o.id, o.document_id, o.job_id, o.status, (to_jsonb(o) ->> 'lease_token')::bigint, 1,
           j.id, j.status, (to_jsonb(j) ->> 'lease_token')::bigint
      from old_rows o
      left join public.ingestion_jobs j on j.document_id = o.document_id and j.status in ('pending', 'processing');
    return null;
end;
$$;
create or replace function public.fault_audit_artifact_deletes() returns trigger
language plpgsql set search_path = pg_catalog, pg_temp as $$
begin
    insert into public.fault_audit_deletions (relation, generation_id, document_id, job_id, generation_status,
                                              generation_token, row_count, open_job_id, open_job_status,
                                              open_job_token)
    select TG_TABLE_NAME, o.index_generation_id, o.document_id, g.job_id, g.status,
           (to_jsonb(g) ->> 'lease_token')::bigint, o.n, j.id, j.status, (to_jsonb(j) ->> 'lease_token')::bigint
      from (select r.document_id, r.index_generation_id, count(*) as n from old_rows r group by 1, 2) o
      -- gone already when the rows go by cascade from their generation (audited itself)
      left join public.index_generations g on g.id = o.index_generation_id
      left join public.ingestion_jobs j on j.document_id = o.document_id and j.status in ('pending', 'processing');
    return null;
end;
$$;
drop trigger if exists fault_audit on public.index_generations;
create trigger fault_audit after delete on public.index_generations referencing old table as old_rows
    for each statement execute function public.fault_audit_generation_deletes();
drop trigger if exists fault_audit on public.document_pages;
create trigger fault_audit after delete on public.document_pages referencing old table as old_rows
    for each statement execute function public.fault_audit_artifact_deletes();
drop trigger if exists fault_audit on public.document_sections;
create trigger fault_audit after delete on public.document_sections referencing old table as old_rows
    for each statement execute function public.fault_audit_artifact_deletes();
drop trigger if exists fault_audit on public.document_chunks;
create trigger fault_audit after delete on public.document_chunks referencing old table as old_rows
    for each statement execute function public.fault_audit_artifact_deletes();
"""


def install_deletion_audit(url: str) -> None:
    """The test-only deletion audit (AUDIT_SQL), in this scratch database; idempotent."""
    with connect(url) as conn, conn.transaction():
        conn.execute("select pg_advisory_xact_lock(hashtext('fault_audit_deletions'))")
        conn.execute(AUDIT_SQL)


def is_final_attempt(n: int, final_attempt_every: int) -> bool:
    """Whether the n-th seeded document gets max_attempts=1 (seed_documents)."""
    return bool(final_attempt_every) and n % final_attempt_every == 0


def is_broken(n: int, permanent_failure_every: int, final_attempt_every: int = 0) -> bool:
    """Whether the n-th seeded document is one whose every attempt fails (seed_documents)."""
    every = permanent_failure_every
    return (
        bool(every) and n % every == PERMANENT_FAILURE_OFFSET % every and not is_final_attempt(n, final_attempt_every)
    )


def seed_documents(
    url: str,
    count: int,
    batches: int,
    max_attempts: int = 10,
    run_tag: str = "",
    final_attempt_every: int = 0,
    permanent_failure_every: int = 0,
) -> None:
    """Tiny text documents with distinct bytes, spread over several batches; with
    `final_attempt_every` N, every N-th one (n % N == 0) gets max_attempts=1; with
    `permanent_failure_every` M, every M-th one (is_broken: never a max_attempts=1 one)
    holds NUL bytes, so its parse fails on every attempt (named doc-<n>-broken.txt). On a
    schema with document versions each is enqueued under its key (SOURCE_KEY_PREFIX + its
    name) as `ingest enqueue` does, so the chaos can make new versions of it; before, it is
    inserted by its bytes and enqueued by id."""
    with connect(url) as conn:
        rpc = AnySchemaRpc(conn)
        keyed = rpc.has_versions
        batch_ids = [rpc.create_batch(f"fault batch {run_tag}{i}").batch_id for i in range(batches)]
        for n in range(count):
            rng = random.Random(f"{run_tag}{n}")
            broken = is_broken(n, permanent_failure_every, final_attempt_every)
            name = f"doc-{run_tag}{n}{BROKEN_MARK if broken else ''}.txt"
            content = document_text(f"{run_tag}{n}", rng) + (b"\x00" * 16 if broken else b"")
            attempts = 1 if is_final_attempt(n, final_attempt_every) else max_attempts
            if keyed:
                answer = enqueue_bytes(
                    conn,
                    rpc.enqueue_version,
                    content,
                    collection="default",
                    source_key=SOURCE_KEY_PREFIX + name,
                    source_name=name,
                    mime_type="text/plain",
                    batch_id=batch_ids[n % batches],
                    max_attempts=attempts,
                )
                assert answer.ok and answer.outcome == "new", answer
                continue
            with conn.transaction():
                row = conn.execute(
                    "insert into documents (batch_id, source_name, mime_type, content_sha256, byte_size) "
                    "values (%s, %s, 'text/plain', %s, %s) returning id",
                    (
                        batch_ids[n % batches],
                        name,
                        hashlib.sha256(content).hexdigest(),
                        len(content),
                    ),
                ).fetchone()
                conn.execute(
                    "insert into document_sources (document_id, content) values (%s, %s)", (row["id"], content)
                )
                assert rpc.enqueue(row["id"], batch_id=batch_ids[n % batches], max_attempts=attempts).ok


def document_text(label: str, rng: random.Random) -> bytes:
    """A tiny text document of random words (harness.WORDS), first line `Document <label>`."""
    words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(20, 400)))
    return f"Document {label}\n\n{words}.\n".encode()


@dataclass
class ChaosStats:
    kills: int = 0
    backend_terminations: int = 0
    pauses: int = 0
    stall_signals: int = 0  # SIGUSR1 sent: one stall armed in that worker
    stalls: int = 0  # stalls that happened (a job thread slept past its lease and woke up), from the history
    restarts: int = 0
    # SIGKILLs of a worker that held a job on its final attempt (attempt_count = max_attempts)
    # mid-build, its backends gone and the job still `processing` under that claim afterwards
    final_attempt_kills: int = 0
    final_attempt_jobs: list[str] = field(default_factory=list)  # those jobs: each must end dead-lettered
    server_restarts: int = 0  # the embedded server stopped (fast) and started under the fleet
    all_backends_terminated: int = 0  # server the harness may not restart: every backend of the database
    backends_terminated_all: int = 0  # backends those terminations ended
    worker_exits: list[str] = field(default_factory=list)  # workers that exited on their own (replaced)
    janitor_passes: int = 0  # passes that ran all three calls without an error
    janitor_errors: list[str] = field(default_factory=list)  # every pass that raised, and why
    final_cleanup_calls: int = 0  # the last pass's extra cleanup calls (until nothing was left)
    # The operator's lifecycle calls (operator.jsonl): deletes and batch cancels that
    # returned ok, what they cancelled, and every refusal by reason (events)
    deletes: int = 0
    deletes_in_flight: int = 0  # its job was being built: that worker must be refused from then on
    deletes_purged: int = 0  # nothing in flight: its rows went in the delete's own transaction
    cancels: int = 0
    cancels_in_flight: int = 0  # jobs being built when their batch was cancelled
    cancelled_batches: set = field(default_factory=set)  # the batches they cancelled (one may be cancelled twice)
    jobs_cancelled: int = 0  # by deletes and cancels, as their answers say
    # Bulk retries that returned ok (by mode), the jobs they put back in the queue and the
    # jobs they refused, by reason (as their answers say)
    retries: int = 0
    retries_by_mode: Counter = field(default_factory=Counter)
    jobs_retried: int = 0
    retry_refused: Counter = field(default_factory=Counter)
    # How each final-attempt job had ended when a retry that could take it was about to run
    # (job id -> (status, stage)): final_attempt_outcomes reads it for a job retried since.
    final_attempt_seen: dict = field(default_factory=dict)
    # New versions of documents (their bytes changed at the source) that the database took:
    # how many superseded an older version's open job, and of those how many took over from
    # a build in flight (its job was being built when chosen, and still open when superseded)
    versions: int = 0
    versions_superseding: int = 0
    versions_in_flight: int = 0
    operator_errors: list[str] = field(default_factory=list)  # every lifecycle call that raised, and why
    operator_deadlocks: int = 0  # of those, the calls that got 40P01 (also in the history: the checker's rule)
    janitor_deadlocks: int = 0  # janitor passes that failed on 40P01 (among janitor_errors)
    histories: list[Path] = field(default_factory=list)  # the workers' and the janitor's, for the checker
    events: Counter = field(default_factory=Counter)
    sync: SyncStats | None = None  # the syncs of a churning folder (run_faults' `sync_folder`)
    sync_race: RaceStats | None = None  # the raced syncs of that folder (sync_race.RaceLoop)
    sync_race_log: Path | None = None  # their passes' log, for sync_race.check_sync_races

    def summary(self) -> str:
        return (
            f"kills={self.kills} backend_terminations={self.backend_terminations} pauses={self.pauses} "
            f"stall_signals={self.stall_signals} stalls={self.stalls} restarts={self.restarts} "
            f"final_attempt_kills={self.final_attempt_kills} server_restarts={self.server_restarts} "
            f"all_backends_terminated={self.all_backends_terminated} ({self.backends_terminated_all} backends) "
            f"worker_exits={self.worker_exits} "
            f"janitor_passes={self.janitor_passes} janitor_errors={len(self.janitor_errors)}"
            + (f" {self.janitor_errors[:5]}" if self.janitor_errors else "")
            + f" final_cleanup_calls={self.final_cleanup_calls} {self.lifecycle_summary()}"
            + f" events={dict(self.events)}"
        )

    def lifecycle_summary(self) -> str:
        return (
            f"deletes={self.deletes} (in_flight={self.deletes_in_flight} purged={self.deletes_purged}) "
            f"cancels={self.cancels} (in_flight={self.cancels_in_flight}) jobs_cancelled={self.jobs_cancelled} "
            f"retries={self.retries} {dict(self.retries_by_mode)} jobs_retried={self.jobs_retried} "
            f"retry_refused={dict(self.retry_refused)} "
            f"versions={self.versions} (superseding={self.versions_superseding} in_flight={self.versions_in_flight}) "
            f"operator_errors={len(self.operator_errors)} (deadlocks={self.operator_deadlocks})"
            + (f" {self.operator_errors[:5]}" if self.operator_errors else "")
        )


class ServerControl:
    """Restarts the database server under the fleet, or, for a server the harness must not
    restart (the machine's PostgreSQL, TEST_DATABASE_URL), terminates every backend of the
    database instead: either way every connection the workers' pools hold is dead.
    `lock` is held for the whole action and by each janitor pass (the janitor runs with
    fresh connections and must report no error; the workers must ride it out)."""

    def __init__(self, url: str, data_dir: Path | None):
        self.url, self.data_dir = url, data_dir
        self.lock = threading.Lock()

    @classmethod
    def for_url(cls, url: str) -> ServerControl:
        return cls(url, embedded_data_dir(url))

    @property
    def restarts(self) -> bool:
        return self.data_dir is not None

    def restart(self) -> float:
        """Stop (fast: sessions terminated, transactions rolled back) and start again; the
        server comes back on the same socket, so the URL holds. Returns the seconds down."""
        started = time.monotonic()
        embedded.stop(self.data_dir)
        uri = embedded.start(self.data_dir)
        if _server_address(uri) != _server_address(self.url):
            raise RuntimeError(f"the embedded server came back elsewhere: {uri} (was {self.url})")
        return time.monotonic() - started

    def terminate_all(self) -> int:
        """Every backend of this database but ours: how many were terminated."""
        with connect(self.url) as conn:
            return conn.execute(
                "select count(*) filter (where pg_terminate_backend(pid)) as n from pg_stat_activity "
                "where datname = current_database() and pid <> pg_backend_pid() and backend_type = 'client backend'"
            ).fetchone()["n"]


def _server_address(url: str) -> tuple:
    params = psycopg.conninfo.conninfo_to_dict(url)
    return params.get("host") or "", str(params.get("port") or "5432")


def embedded_data_dir(url: str) -> Path | None:
    """The `ingestion_pipeline.db.embedded` data dir of the server at `url` when it is one
    (a socket URL, the server's data_directory `<data_dir>/pgdata` with the embedded lock
    file beside it, running); None otherwise, and always for TEST_DATABASE_URL's server."""
    external = os.environ.get("TEST_DATABASE_URL")
    if external and _server_address(external) == _server_address(url):
        return None
    if not _server_address(url)[0].startswith("/"):
        return None
    try:
        with connect(url) as conn:
            pgdata = Path(conn.execute("select current_setting('data_directory') as d").fetchone()["d"])
    except Exception:  # not a superuser, or not reachable: not ours to restart
        return None
    data_dir = pgdata.parent
    if pgdata.name != "pgdata" or not (data_dir / ".embedded.lock").exists():
        return None
    return data_dir if embedded.status(data_dir).running else None


class WorkerFleet:
    """Worker processes on `worker_url` (default `url`: the server itself; a pooler's URL
    puts every worker connection behind it, while the harness, the janitor and the checker
    keep to `url`)."""

    def __init__(self, url: str, folder: Path, size: int, worker_url: str | None = None):
        self.url, self.folder, self.size = url, folder, size
        self.worker_url = worker_url or url
        install_deletion_audit(url)
        self.processes: dict[str, subprocess.Popen] = {}
        self.count = 0

    def start(
        self,
        slow_seconds: float = 0.0,
        stall_seconds: float = 0.0,
        stalls_armed: int = 0,
        stall_points: str = "begin_generation,commit",
    ) -> str:
        """A worker process; `stalls_armed` stalls are armed from the start (more with SIGUSR1),
        each `stall_seconds` long (0: drawn past the lease), at `stall_points` in turn
        (tests/faults/worker_process.py)."""
        self.count += 1
        label = f"w{self.count}"
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        self.processes[label] = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.faults.worker_process",
                self.worker_url,
                str(self.history(label)),
                label,
                str(slow_seconds),
                str(stall_seconds),
                str(stalls_armed),
                stall_points,
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=(self.folder / f"{label}.err").open("w"),
        )
        return label

    def ready(self, label: str) -> bool:
        """Its SIGUSR1 handler is installed (before that the signal would kill it)."""
        return self.history(label).with_suffix(".ready").exists()

    def history(self, label: str) -> Path:
        return self.folder / f"{label}.jsonl"

    def histories(self) -> list[Path]:
        return sorted(self.folder.glob("w*.jsonl"))

    @property
    def pooled(self) -> bool:
        """The workers reach the server through a pooler: the server connections that carry
        a worker's application_name outlive it (idle, the pooler's) after it is gone."""
        return self.worker_url != self.url

    def alive(self) -> list[str]:
        return [label for label, proc in self.processes.items() if proc.poll() is None]

    def stop_all(self, timeout: float = 30) -> None:
        for proc in self.processes.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
                proc.terminate()
        deadline = time.monotonic() + timeout
        for proc in self.processes.values():
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


# The calls of one janitor pass at head, in order (worker/janitor.py run_janitor's, with one
# bounded cleanup call instead of its dry-run-then-delete loop).
JANITOR_PASS_CALLS = ("expire_stale", "refresh_stuck_batches", "refresh_drifted_batches", "cleanup")


def janitor_pass(url: str, history: HistoryFile | None = None, *, final: bool = False) -> int:
    """Expire, refresh stuck batches, recount batches whose counters drifted, clean up:
    each call logged in `history` when given (the recount is no statement, and so not
    logged, on a schema before the batch counters). `final` (the pass after the drain):
    the cleanup is called again until a call deletes nothing (no generation, no source
    of a deleted document), so no row the cleanup owes is left for the checker. Returns
    how many extra cleanup calls that took."""
    with connect(url) as conn:
        rpc = (
            LoggedRpc(conn, history, stale_after_seconds=STALE)
            if history is not None
            else AnySchemaRpc(conn, stale_after_seconds=STALE)
        )
        rpc.expire_stale()
        rpc.refresh_stuck_batches()
        rpc.refresh_drifted_batches()
        cleaned = rpc.cleanup_generations(limit=50, dry_run=False)
        extra = 0
        while final and _cleaned_anything(cleaned) and extra < FINAL_CLEANUP_MAX_CALLS:
            cleaned = rpc.cleanup_generations(limit=FINAL_CLEANUP_LIMIT, dry_run=False)
            extra += 1
        return extra


def _cleaned_anything(result) -> bool:
    """A cleanup call deleted something: a generation, artifact rows, or the source bytes
    of a deleted document (`sources`, on the lifecycle schema)."""
    counts = result.model_dump(include={"generations", "pages", "sections", "chunks", "sources"})
    return any(counts.values())


class Janitor:
    """janitor_pass every `interval` seconds in a thread, logged in its own history. An
    error is never swallowed silently: it is counted and recorded (stats.janitor_errors,
    and the failed call in the history), and the next pass runs as usual."""

    def __init__(
        self,
        url: str,
        history_path: Path,
        stats: ChaosStats,
        interval: float = 1.0,
        server_lock: threading.Lock | None = None,
    ):
        self.url, self.stats, self.interval = url, stats, interval
        self.server_lock = server_lock or threading.Lock()  # held by a server restart
        self.history_path = history_path
        self.history = HistoryFile(str(history_path))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def run_pass(self, final: bool = False) -> bool:
        """One pass; `final`: its cleanup runs until nothing is left (janitor_pass)."""
        try:
            with self.server_lock:
                self.stats.final_cleanup_calls += janitor_pass(self.url, self.history, final=final)
        except Exception as exc:
            self.stats.janitor_errors.append(describe(exc))
            self.stats.janitor_deadlocks += rolled_back(exc) == DEADLOCK
            return False
        self.stats.janitor_passes += 1
        return True

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.run_pass()

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def open_jobs(url: str) -> int:
    with connect(url) as conn:
        return conn.execute(
            "select count(*) as n from ingestion_jobs where status in ('pending', 'processing')"
        ).fetchone()["n"]


def _label_of(worker_id: str | None) -> str | None:
    """The fleet label (`wN`) in a worker id (host:pid:label:hex, worker/identity.py)."""
    parts = (worker_id or "").rsplit(":", 2)
    return parts[1] if len(parts) == 3 else None


def _final_attempt_jobs(conn) -> dict[str, list[dict]]:
    """Jobs held mid-build on their final attempt, by the label of the worker holding them."""
    held: dict[str, list[dict]] = {}
    for row in conn.execute("""
            select id, locked_by, lease_token from ingestion_jobs
             where status = 'processing' and attempt_count >= max_attempts and lease_expires_at > now()"""):
        label = _label_of(row["locked_by"])
        if label is not None:
            held.setdefault(label, []).append(row)
    return held


def _wait_backends_gone(url: str, label: str, timeout: float = 5.0, pooled: bool = False) -> None:
    """A SIGKILLed client's backends finish the statement in flight (an autocommit call
    commits) and then exit: wait for that, so the job rows show the kill's outcome. Behind
    a pooler (`pooled`) the server connections it used stay, idle, with its
    application_name: wait for those in a statement or a transaction (the pooler closes a
    server connection whose client left it mid-transaction)."""
    busy = " and state is distinct from 'idle'" if pooled else ""
    deadline = time.monotonic() + timeout
    with connect(url) as conn:
        while (
            time.monotonic() < deadline
            and conn.execute(
                "select count(*) as n from pg_stat_activity where application_name = %s" + busy, (f"fault-{label}",)
            ).fetchone()["n"]
        ):
            time.sleep(0.05)


def final_attempt_kill(
    url: str, fleet: WorkerFleet, stats: ChaosStats, rng: random.Random, candidates: list[str], tries: int = 8
) -> bool:
    """SIGKILL a worker that holds a job on its final attempt. The candidates are frozen
    (SIGSTOP) while the database is asked which of them hold such a job, so the one picked
    cannot finish it between the look-up and the kill; the others resume at once. Counted
    when, its backends gone, the job is still `processing` under the claim seen: nothing
    but the janitor's (or a claim loop's) expiry can end it now, as `failed`."""
    for attempt in range(tries):
        if attempt:
            time.sleep(0.05)
        frozen = [label for label in candidates if fleet.processes[label].poll() is None]
        for label in frozen:
            fleet.processes[label].send_signal(signal.SIGSTOP)
        victim = None
        try:
            with connect(url) as conn:
                held = _final_attempt_jobs(conn)
            holders = [label for label in frozen if held.get(label)]
            if holders:
                victim = rng.choice(holders)
                fleet.processes[victim].kill()
        finally:
            for label in frozen:
                if label != victim and fleet.processes[label].poll() is None:
                    fleet.processes[label].send_signal(signal.SIGCONT)
        if victim is None:
            continue
        fleet.processes[victim].wait()
        stats.kills += 1
        fleet.start()
        stats.restarts += 1
        _wait_backends_gone(url, victim, pooled=fleet.pooled)
        with connect(url) as conn:
            still = [
                str(job["id"])
                for job in held[victim]
                if conn.execute(
                    "select status = 'processing' and lease_token is not distinct from %s as held "
                    "from ingestion_jobs where id = %s",
                    (job["lease_token"], job["id"]),
                ).fetchone()["held"]
            ]
        if still:
            stats.final_attempt_kills += 1
            stats.final_attempt_jobs.extend(still)
            return True
    return False


def server_restart(server: ServerControl, stats: ChaosStats) -> None:
    """Restart the server (or end every backend of the database): the workers' pools are
    left holding dead idle connections, their jobs in flight lose theirs mid-call."""
    with server.lock:
        if server.restarts:
            stats.events["server_down_seconds"] = round(stats.events["server_down_seconds"] + server.restart(), 2)
            stats.server_restarts += 1
        else:
            stats.backends_terminated_all += server.terminate_all()
            stats.all_backends_terminated += 1


# An open job the operator's chaos leaves alone: one of the final-attempt kills (it must end
# dead-lettered) or one held by a worker with a stall armed or under way (its zombie must
# meet a takeover). %(jobs)s: uuid[], %(labels)s: text[] (worker ids are host:pid:label:hex).
SPARED_JOB = """(j.status in ('pending', 'processing')
                 and (j.id = any(%(jobs)s::uuid[])
                      or reverse(split_part(reverse(coalesce(j.locked_by, '')), ':', 2)) = any(%(labels)s::text[])))"""


# A retry's targets: a batch with jobs in flight and failed jobs; failed jobs (never a
# final-attempt one, %(final)s) of up to %(batches)s batches, those with jobs in flight
# first, up to %(per_batch)s of each.
BATCH_IN_FLIGHT_WITH_FAILED = """
    select b.id from import_batches b
     where exists (select 1 from ingestion_jobs j where j.batch_id = b.id and j.status = 'processing')
       and exists (select 1 from ingestion_jobs j where j.batch_id = b.id and j.status = 'failed')
     order by random() limit 1"""
FAILED_JOBS_OF_SEVERAL_BATCHES = """
    with failed as (
        select j.id, j.batch_id, row_number() over (partition by j.batch_id order by random()) as nth
          from ingestion_jobs j
         where j.status = 'failed' and j.batch_id is not null and not j.id = any(%(final)s::uuid[])),
    batches as (
        select f.batch_id from failed f group by f.batch_id
         order by exists (select 1 from ingestion_jobs o where o.batch_id = f.batch_id and o.status = 'processing')
                  desc, random()
         limit %(batches)s)
    select f.id from failed f join batches using (batch_id) where f.nth <= %(per_batch)s"""


# A new version's document: live, keyed, never broken nor with a max_attempts=1 job, and
# none of its jobs spared; `building`, its job being built right now (a document has one
# open job at most). VERSION_TARGET_BUILDING takes only such a document, and locks that job
# the way the enqueue's first step does (a job a worker holds locked is skipped): until
# the transaction that supersedes it commits, the build cannot end, so the new version
# provably takes over from a build in flight (a look-up that let go of the job lost that
# race five times in five to builds of a few milliseconds: CI, 2026-12-03).
_VERSION_TARGET_FILTER = f"""
     d.source_key is not null and d.deleted_at is null and strpos(d.source_name, '{BROKEN_MARK}') = 0
       and not exists (select 1 from ingestion_jobs j where j.document_id = d.id
                        and (j.max_attempts = 1 or {SPARED_JOB}))"""
VERSION_TARGET = f"""
    select d.id, d.collection, d.source_key, d.source_name, b.id as building
      from documents d
      left join ingestion_jobs b on b.document_id = d.id and b.status = 'processing'
     where {_VERSION_TARGET_FILTER}
       and (%(document)s::uuid is null or d.id = %(document)s::uuid)
     order by random() limit 1"""
VERSION_TARGET_BUILDING = f"""
    select d.id, d.collection, d.source_key, d.source_name, b.id as building
      from ingestion_jobs b
      join documents d on d.id = b.document_id
     where b.status = 'processing' and {_VERSION_TARGET_FILTER}
       and (%(document)s::uuid is null or d.id = %(document)s::uuid)
     order by random() limit 1
       for no key update of b skip locked"""


class Operator:
    """The operator's lifecycle calls made by the chaos: each logged in its own history
    (rpc_log.LoggedRpc, worker `operator`) on a fresh connection, counted in the stats;
    a call that raised is recorded (stats.operator_errors, those that got 40P01 also in
    stats.operator_deadlocks, and in the history), never swallowed silently. A call never
    touches an open job of another fault's (SPARED_JOB): the final-attempt kills' jobs and
    those of stalling workers (`spared_labels`), so the other faults still prove what they
    are there for; a retry by ids never names a final-attempt job, and one by batch or of
    every failed job runs only once each final-attempt job it could take has ended (its
    end recorded first: stats.final_attempt_seen)."""

    def __init__(self, url: str, history_path: Path, stats: ChaosStats):
        self.url, self.stats, self.history_path = url, stats, history_path
        self.history = HistoryFile(str(history_path))
        self._versions: bool | None = None

    @property
    def makes_versions(self) -> bool:
        """Whether the schema has document versions (new_version does nothing before them)."""
        if self._versions is None:
            with connect(self.url) as conn:
                self._versions = AnySchemaRpc(conn).has_versions
        return self._versions

    def _spared(self, spared_labels) -> dict:
        return {"jobs": list(self.stats.final_attempt_jobs), "labels": sorted(spared_labels or ())}

    def delete_document(self, rng: random.Random, in_flight: bool | None = None, spared_labels=()) -> None:
        """Delete a random document: one being built right now (`in_flight`, or a share of
        the time), one still queued, or any."""
        draw = rng.random()
        want = (
            "in_flight"
            if in_flight or (in_flight is None and draw < DELETE_IN_FLIGHT_SHARE)
            else "queued"
            if in_flight is None and draw < DELETE_IN_FLIGHT_SHARE + DELETE_QUEUED_SHARE
            else "any"
        )
        params = self._spared(spared_labels)
        try:
            with connect(self.url) as conn:
                row = None
                if want != "any":
                    row = conn.execute(
                        "select j.document_id as id from ingestion_jobs j where j.status = %(status)s "
                        f"and not {SPARED_JOB} order by random() limit 1",
                        {**params, "status": "processing" if want == "in_flight" else "pending"},
                    ).fetchone()
                if row is None:
                    row = conn.execute(
                        "select d.id from documents d where not exists (select 1 from ingestion_jobs j "
                        f"where j.document_id = d.id and {SPARED_JOB}) order by random() limit 1",
                        params,
                    ).fetchone()
                if row is None:
                    return
                self.stats.events[f"delete_target_{want}"] += 1
                result = LoggedRpc(conn, self.history, caller=OPERATOR).delete_document(row["id"])
        except Exception as exc:
            self._raised("delete_document", exc)
            return
        self._count_delete(result)

    def _count_delete(self, result) -> None:
        if not result.ok:
            self.stats.events[f"delete_refused_{result.reason}"] += 1
            return
        self.stats.deletes += 1
        self.stats.deletes_in_flight += bool(result.in_flight)
        self.stats.deletes_purged += bool(result.purged)
        self.stats.jobs_cancelled += result.cancelled_job_id is not None

    def delete_this_document(self, document_id) -> None:
        """Delete the given document (one whose build the harness holds: tests/faults/forced.py)."""
        try:
            with connect(self.url) as conn:
                result = LoggedRpc(conn, self.history, caller=OPERATOR).delete_document(document_id)
        except Exception as exc:
            self._raised("delete_document", exc)
            return
        self.stats.events["delete_target_held"] += 1
        self._count_delete(result)

    def cancel_batch(self, rng: random.Random, open_only: bool | None = None, spared_labels=()) -> None:
        """Cancel a random import batch: one with open jobs (`open_only`, or a share of the
        time), else any."""
        want_open = open_only or (open_only is None and rng.random() < CANCEL_OPEN_SHARE)
        params = self._spared(spared_labels)
        spared_batch = f"exists (select 1 from ingestion_jobs j where j.batch_id = b.id and {SPARED_JOB})"
        try:
            with connect(self.url) as conn:
                row = None
                # With syncs running, half of these take a sync's batch (a cancelled sync's files
                # must be built by a later pass: `requeued`).
                of_sync = self.stats.sync is not None and rng.random() < 0.5
                wheres = (["and b.metadata ? 'sync' "] if of_sync else []) + [""]
                for where in wheres if want_open else []:
                    if row is None:
                        row = conn.execute(
                            "select b.id from import_batches b where exists (select 1 from ingestion_jobs o "
                            "where o.batch_id = b.id and o.status in ('pending', 'processing')) "
                            f"{where}and not {spared_batch} order by random() limit 1",
                            params,
                        ).fetchone()
                if row is None:
                    row = conn.execute(
                        f"select b.id from import_batches b where not {spared_batch} order by random() limit 1", params
                    ).fetchone()
                if row is None:
                    return
                result = LoggedRpc(conn, self.history, caller=OPERATOR).cancel_batch(row["id"])
        except Exception as exc:
            self._raised("cancel_batch", exc)
            return
        self._count_cancel(row["id"], result)

    def cancel_this_batch(self, batch_id) -> None:
        """Cancel the given batch (a sync's, right after its pass: sync_loop.SyncLoop's thread)."""
        try:
            with connect(self.url) as conn:
                result = LoggedRpc(conn, self.history, caller=OPERATOR).cancel_batch(batch_id)
        except Exception as exc:
            self._raised("cancel_batch", exc)
            return
        self.stats.events["cancel_sync_batch"] += 1
        self._count_cancel(batch_id, result)

    def _count_cancel(self, batch_id, result) -> None:
        if not result.ok:
            self.stats.events[f"cancel_refused_{result.reason}"] += 1
            return
        self.stats.cancels += 1
        self.stats.cancelled_batches.add(str(batch_id))
        self.stats.cancels_in_flight += result.in_flight or 0
        self.stats.jobs_cancelled += result.cancelled or 0

    def retry_failed(self, rng: random.Random, mode: str | None = None) -> None:
        """A bulk retry (retry_failed_ingestion_jobs) racing the workers' acknowledgements:
        `batch_in_flight`, the failed jobs of a batch that has jobs being built (and so
        acknowledged) right now; `jobs`, failed jobs of several batches by id (batches with
        jobs in flight first, so the retry and an acknowledgement lock rows of the same
        batches); `all`, every failed job. A mode with no target (or whose final-attempt
        jobs have not all ended) falls back to `jobs`."""
        try:
            with connect(self.url) as conn:
                target = self._retry_target(conn, rng, mode or rng.choice(RETRY_MODES))
                if target is None:
                    return
                mode, kwargs = target
                self.stats.events[f"retry_target_{mode}"] += 1
                result = LoggedRpc(conn, self.history, caller=OPERATOR).retry_failed(mode=mode, **kwargs)
        except Exception as exc:
            self._raised("retry_failed", exc)
            return
        if not result.ok:
            self.stats.events[f"retry_refused_{result.reason}"] += 1
            return
        self.stats.retries += 1
        self.stats.retries_by_mode[mode] += 1
        self.stats.jobs_retried += result.retried
        self.stats.retry_refused.update(refusal.reason for refusal in result.refused)

    def new_version(
        self, rng: random.Random, in_flight: bool | None = None, spared_labels=(), document_id=None
    ) -> None:
        """New bytes for a random keyed document, as its source changed: one being built
        right now (`in_flight`, or a share of the time), else any live one; then, part of
        the time, one or two more versions of it in quick succession. They go into a random
        batch not cancelled (a cancel may still come first: refused), the first ones into
        none. `document_id`: that document only (a build the harness holds: tests/faults/forced.py)."""
        if not self.makes_versions:
            self.stats.events["new_version_unsupported"] += 1
            return
        want_in_flight = in_flight or (in_flight is None and rng.random() < NEW_VERSION_IN_FLIGHT_SHARE)
        params = {**self._spared(spared_labels), "document": document_id}
        try:
            with connect(self.url) as conn:
                rpc = LoggedRpc(conn, self.history, caller=OPERATOR)
                with rpc.one_transaction(conn):
                    target = conn.execute(VERSION_TARGET_BUILDING, params).fetchone() if want_in_flight else None
                    if target is None:
                        target = conn.execute(VERSION_TARGET, params).fetchone()
                    if target is None:
                        return
                    self.stats.events[f"new_version_target_{'in_flight' if target['building'] else 'any'}"] += 1
                    batch = self._version_batch(conn)
                    self._send_version(rpc, conn, rng, target, batch)
                # The next versions come in quick succession, each in its own transaction.
                for _ in range(rng.randint(0, NEW_VERSIONS_AT_ONCE - 1)):
                    self._send_version(rpc, conn, rng, target, batch)
        except Exception as exc:
            self._raised("new_version", exc)

    def _version_batch(self, conn):
        """A random batch not cancelled; none for the first versions, so no batch cancel takes
        them: the run must see a version above 1 committed (test_fault_run), and a cancel of
        each batch they could have joined once left none (CI, 2026-12-02)."""
        if not self.stats.versions:
            return None
        return conn.execute(
            "select id from import_batches where cancelled_at is null order by random() limit 1"
        ).fetchone()

    def _send_version(self, rpc: LoggedRpc, conn, rng: random.Random, target, batch) -> None:
        result = rpc.new_version(
            conn,
            content=document_text(f"{target['source_name']} v{time.time_ns()}", rng),
            collection=target["collection"],
            source_key=target["source_key"],
            source_name=target["source_name"],
            mime_type="text/plain",
            batch_id=None if batch is None else batch["id"],
            max_attempts=NEW_VERSION_MAX_ATTEMPTS,
        )
        self._count_version(result, target["building"])

    def _count_version(self, result, building) -> None:
        if not result.ok:
            self.stats.events[f"new_version_refused_{result.reason}"] += 1
            return
        self.stats.events[f"new_version_{result.outcome}"] += 1
        self.stats.versions += result.outcome == "new_version"
        if result.superseded_job_id is not None:
            self.stats.versions_superseding += 1
            self.stats.jobs_cancelled += 1
            self.stats.versions_in_flight += str(result.superseded_job_id) == str(building)

    def _retry_target(self, conn, rng: random.Random, mode: str) -> tuple[str, dict] | None:
        """The retry's mode and arguments (None: no failed job to name)."""
        if mode == "batch_in_flight":
            row = conn.execute(BATCH_IN_FLIGHT_WITH_FAILED).fetchone()
            if row is not None and self._final_attempts_ended(conn, row["id"]):
                return mode, {"batch_id": row["id"]}
        elif mode == "all" and self._final_attempts_ended(conn, None):
            return mode, {}
        job_ids = [
            r["id"]
            for r in conn.execute(
                FAILED_JOBS_OF_SEVERAL_BATCHES,
                {
                    "final": list(self.stats.final_attempt_jobs),
                    "batches": RETRY_BATCHES,
                    "per_batch": RETRY_JOBS_PER_BATCH,
                },
            )
        ]
        if not job_ids:
            return None
        rng.shuffle(job_ids)
        return "jobs", {"job_ids": job_ids}

    def _final_attempts_ended(self, conn, batch_id) -> bool:
        """Whether every final-attempt job (of `batch_id`, or all) has ended; each one that
        has is recorded as it ended (stats.final_attempt_seen), before a retry may take it.
        Nothing but the operator's retries moves a job out of `failed`, and the operator
        makes one call at a time: what is seen here is how the job ended."""
        unseen = [job for job in self.stats.final_attempt_jobs if job not in self.stats.final_attempt_seen]
        if not unseen:
            return True
        ended = True
        for row in conn.execute(
            "select id, batch_id, status, stage from ingestion_jobs where id = any(%s::uuid[])", (unseen,)
        ):
            if row["status"] in ("pending", "processing"):
                ended = ended and batch_id is not None and row["batch_id"] != batch_id
            else:
                self.stats.final_attempt_seen[str(row["id"])] = (row["status"], row["stage"])
        return ended

    def _raised(self, call: str, exc: BaseException) -> None:
        self.stats.operator_errors.append(f"{call}: {describe(exc)}")
        self.stats.operator_deadlocks += rolled_back(exc) == DEADLOCK


def chaos_step(
    url: str,
    fleet: WorkerFleet,
    stats: ChaosStats,
    rng: random.Random,
    faults=FAULTS,
    stalling: dict | None = None,
    action: str | None = None,
    server: ServerControl | None = None,
    operator: Operator | None = None,
) -> None:
    """One fault on a random live worker (or on the server), or an operator's lifecycle
    call (a delete, a batch cancel: `operator`, made with the fleet's folder's
    operator.jsonl when not given). `stalling` (label -> how many stalls its history must
    record) holds the workers with a stall armed or under way: no other fault hits them
    until the stall is over (recorded), so each stall plays out as a live zombie (dead or
    frozen processes are the other faults' part)."""
    action = action or rng.choice([*faults, "none"])
    stalling = {} if stalling is None else stalling
    for label in [label for label, armed in stalling.items() if stalls_recorded(fleet.history(label)) >= armed]:
        del stalling[label]
    if action in OPERATOR_ACTIONS:
        operator = operator or Operator(url, fleet.folder / OPERATOR_HISTORY, stats)
        if action == "delete_document":
            # Until one delete caught a build in flight, every delete looks for one.
            operator.delete_document(
                rng, in_flight=True if not stats.deletes_in_flight else None, spared_labels=set(stalling)
            )
        elif action == "cancel_batch":
            operator.cancel_batch(rng, open_only=True if not stats.cancels else None, spared_labels=set(stalling))
        elif action == "new_version":
            # Until one new version took over from a build in flight, every one looks for one.
            operator.new_version(
                rng, in_flight=True if not stats.versions_in_flight else None, spared_labels=set(stalling)
            )
        else:
            # Until one retry put a job back, every retry is one of a batch in flight.
            operator.retry_failed(rng, mode="batch_in_flight" if not stats.jobs_retried else None)
        stats.events[action] += 1
        return
    alive = [label for label in fleet.alive() if label not in stalling]
    if action == "stall":
        alive = [label for label in alive if fleet.ready(label)]
    if action == "server_restart":
        server_restart(server or ServerControl.for_url(url), stats)
        stats.events[action] += 1
        return
    if not alive:
        return
    if action == "final_attempt_kill":
        stats.events["final_attempt_kill_tries"] += 1
        if final_attempt_kill(url, fleet, stats, rng, alive):
            stats.events[action] += 1
        return
    victim = rng.choice(alive)
    proc = fleet.processes[victim]
    if action == "kill":
        proc.kill()
        proc.wait()
        stats.kills += 1
        fleet.start()
        stats.restarts += 1
    elif action == "terminate_backends":
        with connect(url) as conn:
            stats.backend_terminations += conn.execute(
                "select count(*) filter (where pg_terminate_backend(pid)) as n from pg_stat_activity "
                "where application_name = %s",
                (f"fault-{victim}",),
            ).fetchone()["n"]
    elif action == "pause":
        # Past the stale window: another worker reclaims, then the zombie wakes up.
        proc.send_signal(signal.SIGSTOP)
        time.sleep(STALE + 1.5)
        proc.send_signal(signal.SIGCONT)
        stats.pauses += 1
    elif action == "stall":
        # The next job thread of that worker to reach the stall point sleeps past its lease;
        # the claim loop and the other job thread go on. Protected until it is surely over.
        proc.send_signal(signal.SIGUSR1)
        stats.stall_signals += 1
        stalling[victim] = stalls_recorded(fleet.history(victim)) + 1
    stats.events[action] += 1


def _replace_exited(fleet: WorkerFleet, stats: ChaosStats, workers: int) -> None:
    """A worker that exited on its own (none should) is recorded and replaced."""
    for label, proc in list(fleet.processes.items()):
        if proc.poll() is not None and proc.returncode != -signal.SIGKILL and label not in stats.worker_exits:
            stats.worker_exits.append(label)
    while len(fleet.alive()) < workers:
        fleet.start()


def run_faults(
    url: str,
    folder: Path,
    *,
    documents: int,
    workers: int = 3,
    batches: int = 4,
    chaos_seconds: float | None = None,
    chaos_jobs: int | None = None,
    chaos_every_jobs: int = 5,
    min_janitor_passes: int = 0,
    drain_timeout: float = 120,
    seed: int = 7,
    refill: bool = False,
    faults=FAULTS,
    server: ServerControl | None = None,
    final_attempt_every: int = FINAL_ATTEMPT_EVERY,
    permanent_failure_every: int = PERMANENT_FAILURE_EVERY,
    worker_url: str | None = None,
    sync_folder: Path | None = None,
) -> ChaosStats:
    """Seed, start the fleet, force each fault kind once (tests/faults/forced.py), then a
    random fault each time `chaos_every_jobs` more jobs have ended, until `chaos_jobs` more
    have ended (a bounded run: by progress, however slow the machine) or `chaos_seconds`
    have passed (the soak, a bench); then wait until every stall is over and the janitor
    made `min_janitor_passes` passes, and let everything drain.
    `server` restarts the database (found from the URL when not given: the embedded
    server is restarted, any other has every backend of the database terminated).
    `worker_url` is where the worker processes connect (default `url`; e.g. a pooler in
    front of it): the seeding, the faults, the janitor and the checks use `url`. With
    `sync_folder`, a churning folder is synced throughout the chaos (sync_loop.SyncLoop),
    then once more at rest before the drain."""
    rng = random.Random(seed)
    install_deletion_audit(url)
    if server is None and "server_restart" in faults:
        server = ServerControl.for_url(url)
    seed_documents(
        url,
        documents,
        batches,
        final_attempt_every=final_attempt_every,
        permanent_failure_every=permanent_failure_every,
    )
    fleet = WorkerFleet(url, folder, workers, worker_url=worker_url)
    stats = ChaosStats()
    operator = Operator(url, folder / OPERATOR_HISTORY, stats)
    for _ in range(workers):
        fleet.start()
    janitor = Janitor(url, folder / JANITOR_HISTORY, stats, server_lock=server.lock if server else None)
    janitor.start()
    syncs = races = None
    if sync_folder is not None:
        server_lock = server.lock if server else threading.Lock()

        def cancel_sync_batch(batch_id: str) -> None:
            with server_lock:  # never while the server restarts (the operator's other calls are on this thread)
                operator.cancel_this_batch(batch_id)

        syncs = SyncLoop(url, sync_folder, seed, cancel=cancel_sync_batch)
        # In-process passes beside the `ingest sync` processes, racing their own deletes.
        stats.sync_race_log = folder / "sync_races.jsonl"
        races = RaceLoop(url, syncs.share, SYNC_COLLECTION, stats.sync_race_log, seed + 1, SYNC_MAX_ATTEMPTS)
    if syncs is not None and races is not None:
        syncs.start()  # seeds the folder first
        races.start()
        stats.sync, stats.sync_race = syncs.stats, races.stats
    try:
        wave = 0
        stalling: dict[str, int] = {}

        def step(action: str | None = None) -> None:
            chaos_step(url, fleet, stats, rng, faults, stalling, action=action, server=server, operator=operator)

        forced_after = force_faults(url, fleet, stats, operator, rng, faults, stalling, step, _wait_backends_gone)
        chaos_end = None if chaos_seconds is None else time.monotonic() + chaos_seconds
        next_fault = finished_jobs(url) + chaos_every_jobs
        chaos_until = None if chaos_jobs is None else next_fault - chaos_every_jobs + chaos_jobs
        while True:
            done = finished_jobs(url)
            if chaos_until is not None and (done >= chaos_until or not open_jobs(url)):
                break
            if chaos_end is not None and time.monotonic() >= chaos_end:
                break
            if done >= next_fault:
                step()
                next_fault = finished_jobs(url) + chaos_every_jobs
            time.sleep(0.1)
            _replace_exited(fleet, stats, workers)
            if refill and open_jobs(url) < documents // 4:
                wave += 1
                seed_documents(
                    url,
                    documents,
                    batches,
                    run_tag=f"wave{wave}-",
                    final_attempt_every=final_attempt_every,
                    permanent_failure_every=permanent_failure_every,
                )
        # Conditions that must happen, waited for (not asserted on time): every stall over (its
        # zombie woke and acted), and the janitor's passes the caller asks for.
        for label in list(stalling):
            wait_for(lambda label=label: stalls_recorded(fleet.history(label)) >= stalling[label], f"{label}'s stall")
        wait_for(lambda: stats.janitor_passes >= min_janitor_passes, f"{min_janitor_passes} janitor passes")
        for what, condition in forced_after.items():
            wait_for(condition, what)
        if races is not None:
            races.stop()  # before the final sync: nothing but the workers moves after it
        if syncs is not None:
            syncs.settle()
        deadline = time.monotonic() + drain_timeout
        while open_jobs(url) and time.monotonic() < deadline:
            _replace_exited(fleet, stats, workers)
            time.sleep(0.5)
    finally:
        if races is not None:
            races.stop()
        if syncs is not None:
            syncs.stop()
        janitor.stop()
        fleet.stop_all()
    janitor.run_pass(final=True)
    stats.histories = [
        *fleet.histories(),
        janitor.history_path,
        *([operator.history_path] if operator.history_path.exists() else []),
    ]
    stats.events["histories"] = len(stats.histories)
    stats.stalls = sum(1 for entry in read_history(fleet.histories()) if entry["call"] == "stall")
    return stats


def final_attempt_outcomes(url: str, job_ids, seen: dict | None = None) -> dict:
    """How the jobs of the final-attempt kills ended: (status, stage) -> count. `seen`
    (ChaosStats.final_attempt_seen): how some had ended before a retry could take them;
    the others are read from the database."""
    seen = seen or {}
    outcomes: Counter = Counter(tuple(seen[str(job)]) for job in job_ids if str(job) in seen)
    rest = [str(job) for job in job_ids if str(job) not in seen]
    if rest:
        with connect(url) as conn:
            for r in conn.execute(
                "select status, stage, count(*) as n from ingestion_jobs where id = any(%s::uuid[]) group by 1, 2",
                (rest,),
            ):
                outcomes[(r["status"], r["stage"])] += r["n"]
    return dict(outcomes)
