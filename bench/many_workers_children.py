"""The children of many_workers.py, spawned (so at module top level): `ingest work`'s
claim loop or a Dagster drain run on the no-op processor, each timing its claims and
acknowledgements through a QueueProbe, all released at one barrier by run_children."""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import queue
import threading
import time
from contextlib import contextmanager

SETUP_TIMEOUT = 300  # seconds for every child to import, connect and reach the barrier


# -- in each child: timing the claim and the acknowledgements --------------------------


class QueueProbe:
    """Wraps a worker's IngestionRpc (instance attributes shadow the methods, so the
    Worker, its AckBuffer and its LeaseKeeper all go through the wrappers): every claim's
    duration and the pool checkout inside it, the first claim's start and the last
    acknowledgement that completed a job (monotonic: one clock for every process here)."""

    def __init__(self, rpc) -> None:
        self.claims: list[float] = []
        self.checkouts: list[float] = []
        self.first_claim: float | None = None
        self.last_ack: float | None = None
        self._in_claim = threading.local()
        claim, complete_many, connection = rpc.claim, rpc.complete_many, rpc._connection

        def timed_claim(*args, **kwargs):
            began = time.perf_counter()
            if self.first_claim is None:
                self.first_claim = time.monotonic()
            self._in_claim.on = True
            try:
                return claim(*args, **kwargs)
            finally:
                self._in_claim.on = False
                self.claims.append(time.perf_counter() - began)

        def timed_complete_many(*args, **kwargs):
            done = complete_many(*args, **kwargs)
            if any(d.ok for d in done):
                self.last_ack = time.monotonic()
            return done

        @contextmanager
        def timed_connection():
            began = time.perf_counter()
            with connection() as conn:
                if getattr(self._in_claim, "on", False):
                    self.checkouts.append(time.perf_counter() - began)
                yield conn

        rpc.claim, rpc.complete_many, rpc._connection = timed_claim, timed_complete_many, timed_connection

    def result(self, counts: dict) -> dict:
        return {
            "counts": counts,
            "first_claim": self.first_claim,
            "last_ack": self.last_ack,
            "claims": self.claims,
            "checkouts": self.checkouts,
        }


def worker_child(uri: str, opts: dict, barrier, out) -> None:
    """One `ingest work --drain` equivalent: the real Worker, no-op processor."""
    result: dict = {"pid": os.getpid()}
    try:
        from ingestion_pipeline.db.connection import make_pool
        from ingestion_pipeline.db.rpc import IngestionRpc
        from ingestion_pipeline.settings import load_settings
        from ingestion_pipeline.worker import Worker
        from ingestion_pipeline.worker.indexing import no_op

        settings = load_settings(
            database_url=uri,
            worker_concurrency=opts["concurrency"],
            claim_batch_size=opts["claim_batch"],
            pool_min_size=1,
            pool_max_size=opts["pool_size"],
        )
        pool = make_pool(uri, settings, application_name="bench-many-workers")
        try:
            rpc = IngestionRpc(pool, stale_after_seconds=settings.stale_after_seconds)
            probe = QueueProbe(rpc)
            worker = Worker(pool, settings, label="bench-many", processor=no_op, rpc=rpc)
            barrier.wait(SETUP_TIMEOUT)
            report = worker.run(drain=True)
        finally:
            pool.close()
        result.update(probe.result(report.counts))
    except BaseException as exc:  # noqa: BLE001 - reported, never a silent hang of the parent
        barrier.abort()
        result["error"] = f"{type(exc).__name__}: {exc}"
    out.put(result)


def dagster_child(uri: str, opts: dict, barrier, out) -> None:
    """One Dagster drain run of ingest_documents, in process (ephemeral instance), with the
    asset's Worker given the no-op processor and the claim probe."""
    result: dict = {"pid": os.getpid()}
    try:
        import logging
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from ingestion_pipeline.definitions import make_definitions
            from ingestion_pipeline.orchestration import assets
            from ingestion_pipeline.orchestration.resources import DatabaseResource, ProcessingResource
            from ingestion_pipeline.worker.indexing import no_op

            logging.getLogger("dagster").setLevel(logging.WARNING)
            probes: list[QueueProbe] = []

            class BenchWorker(assets.Worker):
                def __init__(self, pool, settings, **kwargs):
                    super().__init__(pool, settings, **{**kwargs, "processor": no_op})
                    probes.append(QueueProbe(self.rpc))

            assets.Worker = BenchWorker  # this child only: the asset builds BenchWorker
            job = make_definitions(
                DatabaseResource(database_url=uri, pool_max_size=opts["pool_size"]), ProcessingResource()
            ).resolve_job_def("ingest_documents")
        run_config = {
            "ops": {"document_index": {"config": {"max_jobs": opts["jobs"], "concurrency": opts["concurrency"]}}},
            "loggers": {"console": {"config": {"log_level": "WARNING"}}},
        }
        barrier.wait(SETUP_TIMEOUT)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ran = job.execute_in_process(run_config=run_config, raise_on_error=False)
        result["returned"] = time.monotonic()
        if not ran.success:
            raise RuntimeError(f"ingest_documents run {ran.run_id[:8]} failed")
        [materialization] = ran.asset_materializations_for_node("document_index")
        meta = {k: getattr(v, "value", v) for k, v in materialization.metadata.items()}
        [probe] = probes
        result.update(
            probe.result(
                {
                    "completed": meta["run_indexed"],
                    "failed": meta["run_failed"],
                    "retried": meta["run_retried"],
                    "lease_lost": meta["run_lease_lost"],
                    "abandoned": meta["run_abandoned"],
                }
            )
        )
    except BaseException as exc:  # noqa: BLE001 - reported, as in the worker child above
        barrier.abort()
        result["error"] = f"{type(exc).__name__}: {exc}"
    out.put(result)


def run_children(target, uri: str, opts: dict, processes: int, timeout: float) -> tuple[list[dict], float]:
    """Spawn `processes` children of target; all start their loop at one barrier. Returns
    their results and the monotonic time the parent passed the barrier."""
    ctx = mp.get_context("spawn")
    barrier, out = ctx.Barrier(processes + 1), ctx.Queue()
    procs = [ctx.Process(target=target, args=(uri, opts, barrier, out), daemon=True) for _ in range(processes)]
    for p in procs:
        p.start()
    with contextlib.suppress(threading.BrokenBarrierError):  # a child failed during set-up: its result says why
        barrier.wait(SETUP_TIMEOUT)
    released = time.monotonic()
    results: list[dict] = []
    deadline = released + timeout
    while len(results) < processes:
        try:
            results.append(out.get(timeout=1))
        except queue.Empty:
            if time.monotonic() > deadline or not any(p.is_alive() for p in procs):
                for p in procs:
                    if p.is_alive():
                        p.terminate()
                raise RuntimeError(
                    f"{len(results)} of {processes} children reported "
                    f"({'timeout' if time.monotonic() > deadline else 'the others died'})"
                ) from None
    for p in procs:
        p.join()
    errors = [r["error"] for r in results if "error" in r]
    if errors:
        raise RuntimeError(f"{len(errors)} of {processes} children failed; first: {errors[0]}")
    return results, released
