"""A stateful property test of the queue on a real database: simulated workers, each on
its own connection, claim, heartbeat, build, commit, complete, fail or retry; leases go
stale, the janitor expires and cleans, documents are enqueued and reindexed. After every
step the invariants of docs/state-machine.md must hold, and a worker that lost its lease changes nothing."""

from __future__ import annotations

import inspect

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule, run_state_machine_as_test

from ingestion_pipeline.db.connection import connect
from tests.any_schema_rpc import AnySchemaRpc
from tests.helpers import make_lease_stale, seed_document, snapshot, write_artifacts

WORKERS = ["w1", "w2", "w3"]
STALE = 60
TABLES = "import_batches, documents, document_sources, ingestion_jobs, ingestion_job_stages, index_generations"


def build_machine(url: str):
    class QueueMachine(RuleBasedStateMachine):
        def __init__(self):
            super().__init__()
            self.admin = connect(url)
            self.admin.execute(f"truncate {TABLES} cascade")
            self.conns = {w: connect(url) for w in WORKERS}
            self.rpcs = {w: AnySchemaRpc(c, stale_after_seconds=STALE) for w, c in self.conns.items()}
            self.ops = AnySchemaRpc(self.admin, stale_after_seconds=STALE)
            self.batch_id = self.ops.create_batch("state machine").batch_id
            self.documents: list = []
            self.held: dict = {}  # job_id -> {"worker", "document_id", "generation_id"}
            self.zombies: list = []  # (worker, job_id, document_id, generation_id)

        def teardown(self):
            for conn in [self.admin, *self.conns.values()]:
                conn.close()

        # -- rules ---------------------------------------------------------------
        @rule()
        def enqueue_new_document(self):
            document_id = seed_document(self.admin, self.batch_id)
            assert self.ops.enqueue(document_id, batch_id=self.batch_id, max_attempts=2).ok
            self.documents.append(document_id)

        @precondition(lambda self: self.documents)
        @rule(data=st.data())
        def reindex(self, data):
            document_id = data.draw(st.sampled_from(self.documents))
            result = self.ops.enqueue(document_id, batch_id=self.batch_id, kind="reindex", max_attempts=2)
            assert result.ok or result.reason == "already_queued", result

        @rule(worker=st.sampled_from(WORKERS))
        def claim(self, worker):
            for job in self.rpcs[worker].claim(worker, limit=1):
                previous = self.held.get(job.job_id)
                if previous is not None:  # its lease had gone stale: the old holder is a zombie now
                    assert previous["worker"] != worker
                    self.zombies.append(
                        (previous["worker"], job.job_id, previous["document_id"], previous["generation_id"])
                    )
                self.zombies = [z for z in self.zombies if (z[0], z[1]) != (worker, job.job_id)]
                self.held[job.job_id] = {"worker": worker, "document_id": job.document_id, "generation_id": None}

        def _pick_held(self, data, with_generation: bool | None = None):
            jobs = sorted(
                (
                    j
                    for j, h in self.held.items()
                    if with_generation is None or (h["generation_id"] is not None) == with_generation
                ),
                key=str,
            )
            if not jobs:
                return None, None
            job_id = data.draw(st.sampled_from(jobs))
            return job_id, self.held[job_id]

        @rule(data=st.data())
        def heartbeat(self, data):
            job_id, held = self._pick_held(data)
            if job_id is not None:
                assert self.rpcs[held["worker"]].heartbeat(job_id, held["worker"], progress=50).ok

        @rule(data=st.data())
        def build(self, data):
            job_id, held = self._pick_held(data, with_generation=False)
            if job_id is None:
                return
            worker = held["worker"]
            generation = self.rpcs[worker].begin_generation(job_id, held["document_id"], worker)
            assert generation.ok, generation
            write_artifacts(self.conns[worker], held["document_id"], generation.generation_id)
            held["generation_id"] = generation.generation_id

        @rule(data=st.data())
        def commit_and_complete(self, data):
            job_id, held = self._pick_held(data)
            if job_id is None:
                return
            rpc, worker = self.rpcs[held["worker"]], held["worker"]
            if held["generation_id"] is not None:
                committed = rpc.commit_generation(job_id, held["document_id"], held["generation_id"], worker)
                assert committed.ok and committed.chunk_count == 3, committed
            assert rpc.complete(job_id, held["document_id"], worker_id=worker, batch_id=self.batch_id).ok
            del self.held[job_id]

        @rule(data=st.data(), retry=st.booleans())
        def fail_or_retry(self, data, retry):
            job_id, held = self._pick_held(data)
            if job_id is None:
                return
            outcome = self.rpcs[held["worker"]].fail_or_retry(
                job_id,
                held["document_id"],
                worker_id=held["worker"],
                retry=retry,
                error_message="boom",
                batch_id=self.batch_id,
            )
            assert outcome.ok, outcome
            del self.held[job_id]

        @rule(data=st.data())
        def lease_goes_stale(self, data):
            job_id, _ = self._pick_held(data)
            if job_id is not None:
                make_lease_stale(self.admin, job_id, seconds_ago=STALE * 10)

        @rule()
        def janitor_expires(self):
            self.ops.expire_stale()
            for job_id, held in list(self.held.items()):
                row = self.admin.execute(
                    "select status, locked_by from ingestion_jobs where id = %s", (job_id,)
                ).fetchone()
                if row["status"] != "processing" or row["locked_by"] != held["worker"]:
                    self.zombies.append((held["worker"], job_id, held["document_id"], held["generation_id"]))
                    del self.held[job_id]

        @rule()
        def janitor_cleans(self):
            assert self.ops.cleanup_generations(dry_run=False).ok

        @precondition(lambda self: self.zombies)
        @rule(data=st.data(), action=st.sampled_from(["complete", "fail", "retry", "heartbeat", "commit", "begin"]))
        def zombie_acts(self, data, action):
            worker, job_id, document_id, generation_id = data.draw(st.sampled_from(self.zombies))
            rpc = self.rpcs[worker]
            before = snapshot(self.admin)
            result = {
                "complete": lambda: rpc.complete(job_id, document_id, worker_id=worker),
                "fail": lambda: rpc.fail_or_retry(job_id, document_id, worker_id=worker, error_message="late"),
                "retry": lambda: rpc.fail_or_retry(job_id, document_id, worker_id=worker, retry=True),
                "heartbeat": lambda: rpc.heartbeat(job_id, worker),
                "commit": lambda: (
                    rpc.commit_generation(job_id, document_id, generation_id, worker)
                    if generation_id
                    else rpc.heartbeat(job_id, worker)
                ),
                "begin": lambda: rpc.begin_generation(job_id, document_id, worker),
            }[action]()
            assert result.lease_lost, (action, result)
            assert snapshot(self.admin) == before, f"zombie {action} changed state"

        # -- invariants ----------------------------------------------------------
        @invariant()
        def leases_match_the_model(self):
            for job_id, held in self.held.items():
                row = self.admin.execute(
                    "select status, locked_by from ingestion_jobs where id = %s", (job_id,)
                ).fetchone()
                assert (row["status"], row["locked_by"]) == ("processing", held["worker"])

        @invariant()
        def builds_in_progress_are_never_cleaned(self):
            for held in self.held.values():
                if held["generation_id"] is not None:
                    n = self.admin.execute(
                        "select count(*) as n from document_chunks where index_generation_id = %s",
                        (held["generation_id"],),
                    ).fetchone()["n"]
                    assert n == 3, "cleanup deleted a build under an open job (R23)"

        @invariant()
        def indexed_documents_have_one_consistent_generation(self):
            bad = self.admin.execute("""
                select d.id from documents d
                 where (d.status = 'indexed') <> (d.index_generation_id is not null)
                    or (d.index_generation_id is not null and (
                        (select count(*) from index_generations g
                          where g.document_id = d.id and g.status = 'committed') <> 1
                        or (select g.status from index_generations g where g.id = d.index_generation_id) <> 'committed'
                        or d.chunk_count <> (select count(*) from document_chunks c
                                              where c.index_generation_id = d.index_generation_id)))
            """).fetchall()
            assert bad == [], bad

        @invariant()
        def no_exhausted_job_waits_forever(self):
            n = self.admin.execute(
                "select count(*) as n from ingestion_jobs where status = 'pending' and attempt_count >= max_attempts"
            ).fetchone()["n"]
            assert n == 0, "R7: a pending job can never be claimed again"

        @invariant()
        def batch_status_agrees_with_its_jobs(self):
            row = self.admin.execute(
                """
                select b.status, b.total_files, b.completed_files, b.failed_files,
                       count(j.id) as jobs, count(j.id) filter (where j.status = 'completed') as completed,
                       count(j.id) filter (where j.status = 'failed') as failed,
                       count(j.id) filter (where j.status in ('pending', 'processing')) as open
                  from import_batches b left join ingestion_jobs j on j.batch_id = b.id
                 where b.id = %s group by b.id""",
                (self.batch_id,),
            ).fetchone()
            if row["jobs"]:
                expected = "processing" if row["open"] else ("completed_with_errors" if row["failed"] else "completed")
                assert row["status"] == expected, row
                assert (row["total_files"], row["completed_files"], row["failed_files"]) == (
                    row["jobs"],
                    row["completed"],
                    row["failed"],
                ), row

    return QueueMachine


@pytest.mark.filterwarnings("ignore::hypothesis.errors.NonInteractiveExampleWarning")
def test_queue_state_machine(db_url):
    run_state_machine_as_test(
        build_machine(db_url),
        settings=settings(
            max_examples=25,
            stateful_step_count=30,
            deadline=None,
            derandomize=True,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        ),
    )


class Draws:
    """Stands in for hypothesis' `data` when a scenario drives the machine's rules by hand:
    each draw returns the next value the scenario chose."""

    def __init__(self, *values):
        self.values = list(values)

    def draw(self, strategy, label=None):
        return self.values.pop(0)


def check_invariants(machine) -> None:
    """Every @invariant of the machine, as hypothesis runs them after each step."""
    from hypothesis.stateful import INVARIANT_MARKER

    invariants = [f for _, f in inspect.getmembers(type(machine), callable) if getattr(f, INVARIANT_MARKER, None)]
    assert len(invariants) >= 5
    for invariant_function in invariants:
        invariant_function(machine)


def test_the_machine_catches_a_zombie_completion_on_the_pre_hardening_schema(schema):
    """The run that must fail: the same machine, driven through its own rules along the
    path of R2 (a lease goes stale, another worker reclaims, the old holder completes late).
    At head every step and every invariant holds; before the hardening the zombie's
    completion is accepted and changes state, and the machine says so twice: the rule's
    fence check and the lease invariant."""
    machine = build_machine(schema.url)()
    try:
        machine.enqueue_new_document()
        check_invariants(machine)
        machine.claim(worker="w1")
        [job_id] = machine.held
        check_invariants(machine)
        machine.lease_goes_stale(data=Draws(job_id))
        check_invariants(machine)
        machine.claim(worker="w2")
        check_invariants(machine)
        assert machine.held[job_id]["worker"] == "w2"
        [zombie] = machine.zombies
        assert zombie[:2] == ("w1", job_id)

        if schema.hardened:
            machine.zombie_acts(data=Draws(zombie), action="complete")
            check_invariants(machine)
        else:
            # The rule's fence check: the late completion was accepted, not refused as lease_lost.
            with pytest.raises(AssertionError, match=r"^\('complete', JobOutcome\(ok=True, reason=None, fenced=False"):
                machine.zombie_acts(data=Draws(zombie), action="complete")
            # It changed state: the job w2 holds is completed and unlocked under it; the lease
            # invariant sees that too.
            row = machine.admin.execute(
                "select status, locked_by from ingestion_jobs where id = %s", (job_id,)
            ).fetchone()
            assert (row["status"], row["locked_by"]) == ("completed", None)
            with pytest.raises(AssertionError, match=r"\('completed', None\) == \('processing', 'w2'\)"):
                machine.leases_match_the_model()
    finally:
        machine.teardown()
