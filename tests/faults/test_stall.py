"""The stall fault, forced: one job thread of a live worker stalls past its lease (its
lease is left out of the worker's heartbeat statement; the process, its claim loop, its
other job thread and its other leases go on), a second worker reclaims the job and
completes it, then the thread wakes as a zombie with its old claim's token. Two stall
points: right after begin_generation (the zombie then writes the generation's rows) and
right before its completion goes out (its rows written, where the job's thread hands the
completion to the worker's acknowledgement buffer; the zombie then commits and completes
in a bulk acknowledgement, logged as `commit_and_complete`; on the schema before the
lease tokens the client's fallback logs `commit`).

At head every zombie write is refused: the rows by the artifact fence (IF001), the commit
by the token fence; the checker finds nothing and no write from a superseded token. Just
before the lease-token migration the zombie's rows are accepted (artifacts were fenced by
the client only, and its lease keeper never learned it lost the lease), which the checker
flags; its commit is refused there too (another worker id holds the job), and the checker
says so by finding nothing.

Then worker-id reuse: the stalled thread's own loop claims the job again and is building
it when the zombie wakes. At head the zombie's rows are refused (IF001). Before the lease
tokens its rows, commit and completion all go through (one worker id passes the
worker-id fence twice); a history without tokens cannot show that, so the test reads it
in the database (the committed build is the zombie's)."""

import time

import pytest

from ingestion_pipeline.db.connection import connect
from tests.faults.checker import COMPLETIONS, check
from tests.faults.harness import WorkerFleet, open_jobs, seed_documents
from tests.faults.rpc_log import HistoryFile, LoggedRpc, read_history
from tests.faults.worker_process import FAULT_SETTINGS

# Worker processes under faults: the client's and the workers' behaviour, run once (conftest.py).
pytestmark = pytest.mark.one_server

DOCUMENTS = 6
ZOMBIE_CALLS = {"write", "commit", "commit_and_complete", "record_stage"}


def wait_for(condition, what: str, timeout: float = 60):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def completed_jobs(url: str) -> int:
    with connect(url) as conn:
        return conn.execute("select count(*) as n from ingestion_jobs where status = 'completed'").fetchone()["n"]


def job_status(url: str, job_id: str) -> str:
    with connect(url) as conn:
        return conn.execute("select status from ingestion_jobs where id = %s", (job_id,)).fetchone()["status"]


@pytest.mark.parametrize("point", ["begin_generation", "commit"])
def test_a_job_thread_stalled_past_its_lease_is_fenced_out(token_schema, tmp_path, point):
    url = token_schema.url
    seed_documents(url, DOCUMENTS, 1)
    fleet = WorkerFleet(url, tmp_path, 2)
    try:
        zombie = fleet.start(stall_seconds=60, stalls_armed=1, stall_points=point)  # until released
        stalled = fleet.history(zombie).with_suffix(".stalled")
        wait_for(stalled.exists, "a job thread to stall")
        _, job_id, token = stalled.read_text().split()
        # The stalled process's loop goes on: another job of it completes while the thread
        # sleeps (forced here, before a second worker could take every other job).
        wait_for(lambda: completed_jobs(url) >= 1, "the stalled worker's loop to finish another job")
        fleet.start()  # a second worker: it takes the job once the stalled claim's lease expires
        wait_for(lambda: job_status(url, job_id) == "completed", "the second worker to reclaim and finish the job")
        assert fleet.processes[zombie].poll() is None
        resumed_at = time.time()
        fleet.history(zombie).with_suffix(".release").write_text("wake up")
        zombie_pid = fleet.processes[zombie].pid

        def zombie_calls():
            return [
                e
                for e in read_history([fleet.history(zombie)])
                if e["job_id"] == job_id and e["pid"] == zombie_pid and e["t0"] >= resumed_at
            ]

        wait_for(lambda: any(e["call"] in ZOMBIE_CALLS for e in zombie_calls()), "the zombie's next write")
        wait_for(lambda: open_jobs(url) == 0, "every job to finish")
    finally:
        fleet.stop_all()

    history = read_history(fleet.histories())
    [stall] = [e for e in history if e["call"] == "stall"]
    assert (stall["point"], stall["job_id"]) == (point, job_id)
    # The stalled process kept claiming and finishing other jobs while its thread slept.
    assert any(
        e["call"] in COMPLETIONS
        and e["ok"]
        and e["pid"] == zombie_pid
        and e["job_id"] != job_id
        and stall["t0"] < e["t0"] < stall["t1"]
        for e in history
    ), "the stalled worker's loop stopped"
    claims = [e for e in history if e["call"] == "claim" and e["job_id"] == job_id]
    assert len(claims) == 2 and claims[0]["pid"] == zombie_pid and claims[1]["pid"] != zombie_pid
    after = [(e["call"], e["ok"], e["reason"] or e.get("sqlstate")) for e in zombie_calls()]
    report = check(url, fleet.histories())
    assert report.stats["superseded_token_writes"] == 0, report.summary()
    assert report.stats["jobs"] == {"completed": DOCUMENTS}, report.summary()

    # The partition: from the stall on, no heartbeat statement of the stalled worker named
    # the stalled claim's lease (so it was never told the lease was lost).
    assert not [
        e
        for e in history
        if e["call"] == "heartbeat" and e["job_id"] == job_id and e["pid"] == zombie_pid and e["t0"] >= stall["t0"]
    ]
    if token_schema.hardened:
        assert (token, claims[1]["token"]) == ("1", 2)
        assert report.violations == [], report.summary()
        if point == "begin_generation":  # its rows, refused by the database's artifact fence
            assert after == [("write", False, "lease_lost")], after
            assert [e["sqlstate"] for e in zombie_calls()] == ["IF001"]
            assert report.stats["artifact_writes_refused"] == {"IF001": 1}, report.summary()
        else:  # its commit (and so the completion), refused by the token fence
            assert after == [("commit_and_complete", False, "lease_lost")], after
    elif point == "begin_generation":
        # No artifact fence before the lease tokens: the zombie's rows go in. Its next stage
        # log is refused by the worker-id fence, and that stops it before the commit.
        assert after == [("write", True, None), ("record_stage", False, "lease_lost")], after
        assert any(
            v.startswith(f"write by {stall['worker']} on job {job_id} accepted after") for v in report.violations
        ), report.summary()
    else:
        # The worker-id fence holds when another worker id reclaimed: nothing to flag. (The
        # first call after the wake is the job's stage row, written just before its
        # acknowledgement by tests/any_schema_rpc.py; refused, it stops the job there.)
        assert after == [("record_stage", False, "lease_lost")], after
        assert report.violations == [], report.summary()


def test_a_stalled_thread_of_a_loop_that_reclaimed_its_job_is_fenced_out(token_schema, tmp_path):
    """Worker-id reuse: the stalled thread's own claim loop claims the job again (after
    another worker took it over and handed it back for a retry) and is mid-build when the
    zombie wakes. Both claims carry one worker id: only the token tells them apart."""
    url = token_schema.url
    seed_documents(url, 1, 1)
    fleet = WorkerFleet(url, tmp_path, 1)
    intruder_history = tmp_path / "w0-intruder.jsonl"  # one of fleet.histories()
    try:
        loop = fleet.start(slow_seconds=1.5, stall_seconds=60, stalls_armed=1, stall_points="begin_generation")
        stalled = fleet.history(loop).with_suffix(".stalled")
        embedding = fleet.history(loop).with_suffix(".embedding")
        wait_for(stalled.exists, "a job thread to stall")
        _, _job_id, _ = stalled.read_text().split()
        embedding.unlink()
        # The loop's next build of the job waits in its embedding until the zombie has acted
        # (SlowEmbedder's hold): the zombie provably wakes while that build is in flight.
        embed_hold = embedding.with_name(embedding.name + ".hold")
        embed_hold.write_text("hold")
        with connect(url) as conn:  # another worker takes the job over once the lease expires, and fails it
            intruder = LoggedRpc(
                conn, HistoryFile(str(intruder_history)), stale_after_seconds=FAULT_SETTINGS["stale_after_seconds"]
            )
            claimed = []
            wait_for(lambda: claimed.extend(intruder.claim("intruder")) or claimed, "the stalled lease to expire")
            [job] = claimed
            assert intruder.fail_or_retry(
                job.job_id,
                job.document_id,
                worker_id="intruder",
                lease_token=job.lease_token,
                retry=True,
                error_message="handed back",
                stage="retry_wait",
            ).retried
        wait_for(embedding.exists, "the stalled worker's loop to claim the job again and build it")
        resumed_at = time.time()
        fleet.history(loop).with_suffix(".release").write_text("wake up")
        # The zombie's last call: its refused write at head; before the tokens, its commit.
        last = "write" if token_schema.hardened else "commit"
        wait_for(
            lambda: any(
                e["t0"] >= resumed_at and e["call"].startswith(last) for e in read_history([fleet.history(loop)])
            ),
            "the zombie to act",
        )
        embed_hold.unlink()
        wait_for(lambda: open_jobs(url) == 0, "the job to finish")
    finally:
        fleet.stop_all()

    history = read_history(fleet.histories())
    claims = [e for e in history if e["call"] == "claim"]
    assert [c["worker"] for c in claims] == [claims[0]["worker"], "intruder", claims[0]["worker"]], claims
    [stall] = [e for e in history if e["call"] == "stall"]
    stalled_build = next(e["generation_id"] for e in history if e["call"] == "begin_generation")
    with connect(url) as conn:
        committed = conn.execute("select index_generation_id from documents").fetchone()["index_generation_id"]
    report = check(url, fleet.histories())
    assert report.stats["superseded_token_writes"] == 0, report.summary()
    assert report.stats["jobs"] == {"completed": 1}, report.summary()
    if token_schema.hardened:
        assert [c["token"] for c in claims] == [1, 2, 3]
        # The partition leaves out the stalled claim's lease only: the loop's new claim of the
        # same job (token 3) was renewed by the worker's heartbeat statements meanwhile.
        beats = [(e["token"], e["ok"]) for e in history if e["call"] == "heartbeat" and e["t0"] >= stall["t0"]]
        assert beats and set(beats) == {(3, True)}, beats
        zombie = [
            (e["call"], e["ok"], e.get("sqlstate"))
            for e in history
            if e["t0"] >= resumed_at and e["token"] == stall["token"] and e["call"] != "stall"
        ]
        assert zombie == [("write", False, "IF001")], zombie
        assert str(committed) != stalled_build  # the loop's new claim built what was committed
        assert report.violations == [], report.summary()
    else:
        # The worker-id fence cannot tell the zombie from its loop's new claim: the zombie's
        # rows go in and its build is the one committed (the job completed under it). The
        # history cannot tell them apart either (no tokens, one worker id), so the checker
        # has nothing to flag here: that is what the token is for.
        assert str(committed) == stalled_build
