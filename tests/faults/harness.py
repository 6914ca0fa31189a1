"""The fault harness: worker processes drain tiny documents while a chaos loop SIGKILLs
them, terminates their backends, pauses them past the stale window (zombies), stalls one
job thread of a live worker past its lease (SIGUSR1: that job's heartbeats fail while the
process and its claim loop keep going; the thread then writes and commits as a zombie,
tests/faults/worker_process.py) and restarts them, and a janitor runs alongside, its calls
in a history of their own (janitor.jsonl). Before the run the harness installs a test-only
deletion audit in the scratch database (`install_deletion_audit`, not a migration), which
the checker reads. Used by tests/faults (bounded) and bench/soak.py."""

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

from ingestion_pipeline.db.connection import connect
from ingestion_pipeline.db.rpc import IngestionRpc
from ingestion_pipeline.worker.errors import describe
from tests.faults.rpc_log import HistoryFile, LoggedRpc, read_history
from tests.faults.worker_process import FAULT_SETTINGS, STALL_SECONDS

ROOT = Path(__file__).resolve().parents[2]
STALE = FAULT_SETTINGS["stale_after_seconds"]
FAULTS = ("kill", "terminate_backends", "pause", "stall")
JANITOR_HISTORY = "janitor.jsonl"
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


def seed_documents(url: str, count: int, batches: int, max_attempts: int = 10, run_tag: str = "") -> None:
    """Tiny text documents with distinct bytes, spread over several batches."""
    with connect(url) as conn:
        rpc = IngestionRpc(conn)
        batch_ids = [rpc.create_batch(f"fault batch {run_tag}{i}").batch_id for i in range(batches)]
        for n in range(count):
            rng = random.Random(f"{run_tag}{n}")
            text = (f"Document {run_tag}{n}\n\n" + " ".join(rng.choice(WORDS) for _ in range(rng.randint(20, 400)))
                    + ".\n")
            content = text.encode()
            with conn.transaction():
                row = conn.execute(
                    "insert into documents (batch_id, source_name, mime_type, content_sha256, byte_size) "
                    "values (%s, %s, 'text/plain', %s, %s) returning id",
                    (batch_ids[n % batches], f"doc-{run_tag}{n}.txt", hashlib.sha256(content).hexdigest(),
                     len(content))).fetchone()
                conn.execute("insert into document_sources (document_id, content) values (%s, %s)",
                             (row["id"], content))
                assert rpc.enqueue(row["id"], batch_id=batch_ids[n % batches], max_attempts=max_attempts).ok


@dataclass
class ChaosStats:
    kills: int = 0
    backend_terminations: int = 0
    pauses: int = 0
    stall_signals: int = 0  # SIGUSR1 sent: one stall armed in that worker
    stalls: int = 0  # stalls that happened (a job thread slept past its lease and woke up), from the history
    restarts: int = 0
    janitor_passes: int = 0  # passes that ran all three calls without an error
    janitor_errors: list[str] = field(default_factory=list)  # every pass that raised, and why
    histories: list[Path] = field(default_factory=list)  # the workers' and the janitor's, for the checker
    events: Counter = field(default_factory=Counter)

    def summary(self) -> str:
        return (f"kills={self.kills} backend_terminations={self.backend_terminations} pauses={self.pauses} "
                f"stall_signals={self.stall_signals} stalls={self.stalls} restarts={self.restarts} "
                f"janitor_passes={self.janitor_passes} janitor_errors={len(self.janitor_errors)}"
                + (f" {self.janitor_errors[:5]}" if self.janitor_errors else "") + f" events={dict(self.events)}")


class WorkerFleet:
    def __init__(self, url: str, folder: Path, size: int):
        self.url, self.folder, self.size = url, folder, size
        install_deletion_audit(url)
        self.processes: dict[str, subprocess.Popen] = {}
        self.count = 0

    def start(self, slow_seconds: float = 0.0, stall_seconds: float = 0.0, stalls_armed: int = 0,
              stall_points: str = "begin_generation,commit") -> str:
        """A worker process; `stalls_armed` stalls are armed from the start (more with SIGUSR1),
        each `stall_seconds` long (0: drawn past the lease), at `stall_points` in turn
        (tests/faults/worker_process.py)."""
        self.count += 1
        label = f"w{self.count}"
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        self.processes[label] = subprocess.Popen(
            [sys.executable, "-m", "tests.faults.worker_process", self.url, str(self.history(label)), label,
             str(slow_seconds), str(stall_seconds), str(stalls_armed), stall_points], cwd=ROOT, env=env,
            stdout=subprocess.DEVNULL, stderr=(self.folder / f"{label}.err").open("w"))
        return label

    def ready(self, label: str) -> bool:
        """Its SIGUSR1 handler is installed (before that the signal would kill it)."""
        return self.history(label).with_suffix(".ready").exists()

    def history(self, label: str) -> Path:
        return self.folder / f"{label}.jsonl"

    def histories(self) -> list[Path]:
        return sorted(self.folder.glob("w*.jsonl"))

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


def janitor_pass(url: str, history: HistoryFile | None = None) -> None:
    """Expire, refresh stuck batches, clean up: each call logged in `history` when given."""
    with connect(url) as conn:
        rpc = (LoggedRpc(conn, history, stale_after_seconds=STALE) if history is not None
               else IngestionRpc(conn, stale_after_seconds=STALE))
        rpc.expire_stale()
        rpc.refresh_stuck_batches()
        rpc.cleanup_generations(limit=50, dry_run=False)


class Janitor:
    """janitor_pass every `interval` seconds in a thread, logged in its own history. An
    error is never swallowed silently: it is counted and recorded (stats.janitor_errors,
    and the failed call in the history), and the next pass runs as usual."""

    def __init__(self, url: str, history_path: Path, stats: ChaosStats, interval: float = 1.0):
        self.url, self.stats, self.interval = url, stats, interval
        self.history_path = history_path
        self.history = HistoryFile(str(history_path))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def run_pass(self) -> bool:
        try:
            janitor_pass(self.url, self.history)
        except Exception as exc:
            self.stats.janitor_errors.append(describe(exc))
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
        return conn.execute("select count(*) as n from ingestion_jobs where status in ('pending', 'processing')"
                            ).fetchone()["n"]


def chaos_step(url: str, fleet: WorkerFleet, stats: ChaosStats, rng: random.Random,
               faults=FAULTS, stalling: dict | None = None, action: str | None = None) -> None:
    """One fault on a random live worker. `stalling` (label -> monotonic deadline) holds the
    workers with a stall armed or under way: no other fault hits them meanwhile, so each
    stall plays out as a live zombie (dead or frozen processes are the other faults' part)."""
    action = action or rng.choice([*faults, "none"])
    stalling = {} if stalling is None else stalling
    now = time.monotonic()
    for label in [label for label, until in stalling.items() if until < now]:
        del stalling[label]
    alive = [label for label in fleet.alive() if label not in stalling]
    if action == "stall":
        alive = [label for label in alive if fleet.ready(label)]
    if not alive:
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
                "where application_name = %s", (f"fault-{victim}",)).fetchone()["n"]
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
        stalling[victim] = time.monotonic() + STALL_SECONDS + 3
        stats.stall_signals += 1
    stats.events[action] += 1


def run_faults(url: str, folder: Path, *, documents: int, workers: int = 3, batches: int = 4,
               chaos_seconds: float = 30, drain_timeout: float = 120, seed: int = 7,
               refill: bool = False, faults=FAULTS) -> ChaosStats:
    """Seed, start the fleet, apply chaos for `chaos_seconds`, then let everything drain.
    With "stall" among `faults`, the first fault is a stall (so even a short run has one)."""
    rng = random.Random(seed)
    install_deletion_audit(url)
    seed_documents(url, documents, batches)
    fleet = WorkerFleet(url, folder, workers)
    stats = ChaosStats()
    for _ in range(workers):
        fleet.start()
    janitor = Janitor(url, folder / JANITOR_HISTORY, stats)
    janitor.start()
    try:
        wave = 0
        stalling: dict[str, float] = {}
        chaos_end = time.monotonic() + chaos_seconds
        while time.monotonic() < chaos_end:
            first_stall = "stall" if "stall" in faults and not stats.stall_signals else None
            chaos_step(url, fleet, stats, rng, faults, stalling, action=first_stall)
            time.sleep(rng.uniform(0.3, 1.2))
            if refill and open_jobs(url) < documents // 4:
                wave += 1
                seed_documents(url, documents, batches, run_tag=f"wave{wave}-")
        deadline = time.monotonic() + drain_timeout
        while open_jobs(url) and time.monotonic() < deadline:
            for label in list(fleet.processes):
                if fleet.processes[label].poll() is not None and len(fleet.alive()) < workers:
                    fleet.start()
            time.sleep(0.5)
    finally:
        janitor.stop()
        fleet.stop_all()
    janitor.run_pass()
    stats.histories = [*fleet.histories(), janitor.history_path]
    stats.events["histories"] = len(stats.histories)
    stats.stalls = sum(1 for entry in read_history(fleet.histories()) if entry["call"] == "stall")
    return stats
