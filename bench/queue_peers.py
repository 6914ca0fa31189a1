"""The peers of queue_throughput.py: PgQueuer and Procrastinate, each as a spawned worker
process (draining no-op jobs, reporting as the loops of common.py do) and as a scratch
database that a round fills with fresh jobs and checks afterwards."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta

from common import connect, create_database


def put_result(out, count, started) -> None:
    """What a worker process reports: (jobs, start, end, client CPU seconds)."""
    out.put((count, started, time.monotonic(), time.process_time()))


def pgqueuer_worker(uri: str, k: int, heartbeat: bool, barrier, out) -> None:
    import psycopg
    from pgqueuer import QueueManager
    from pgqueuer.adapters.drivers.psycopg import PsycopgDriver
    from pgqueuer.domain.types import QueueExecutionMode
    from pgqueuer.queries import Queries

    async def main():
        conn = await psycopg.AsyncConnection.connect(uri, autocommit=True)
        qm = QueueManager(Queries(PsycopgDriver(conn)))
        count = 0

        @qm.entrypoint("noop")
        async def noop(job) -> None:
            nonlocal count
            count += 1

        barrier.wait()
        started = time.monotonic()
        await qm.run(
            batch_size=k,
            mode=QueueExecutionMode.drain,
            dequeue_timeout=timedelta(milliseconds=100),
            log_aggregation_interval=timedelta(0),
        )
        put_result(out, count, started)
        await conn.close()

    asyncio.run(main())


def procrastinate_worker(uri: str, k: int, heartbeat: bool, barrier, out) -> None:
    import procrastinate

    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=uri, min_size=1, max_size=k + 2))
    count = 0

    @app.task(name="noop")
    async def noop() -> None:
        nonlocal count
        count += 1

    async def main():
        async with app.open_async():
            barrier.wait()
            started = time.monotonic()
            await app.run_worker_async(wait=False, concurrency=k, install_signal_handlers=False, listen_notify=False)
            put_result(out, count, started)

    asyncio.run(main())


class PgQueuer:
    def __init__(self, server_uri: str):
        self.uri = create_database(server_uri, "bench_pgqueuer")
        asyncio.run(self._with_queries(lambda q: q.install()))

    async def _with_queries(self, action):
        import psycopg
        from pgqueuer.queries import Queries

        async with await psycopg.AsyncConnection.connect(self.uri, autocommit=True) as conn:
            return await action(Queries.from_psycopg_connection(conn))

    def prepare(self, args) -> str:
        n = args.jobs
        asyncio.run(self._with_queries(lambda q: q.enqueue(["noop"] * n, [None] * n, [0] * n)))
        with connect(self.uri) as conn:
            conn.execute("vacuum (analyze) pgqueuer")
        return self.uri

    def check(self, uri: str, args) -> int:
        with connect(uri) as conn:
            left = conn.execute("select count(*) as n from pgqueuer").fetchone()["n"]
            assert left == 0, f"{left} pgqueuer jobs left"
        return args.jobs


class Procrastinate:
    def __init__(self, server_uri: str):
        self.uri = create_database(server_uri, "bench_procrastinate")
        self.app = self._app()
        with self.app.open():
            self.app.schema_manager.apply_schema()

    def _app(self):
        import procrastinate

        app = procrastinate.App(connector=procrastinate.SyncPsycopgConnector(conninfo=self.uri))

        @app.task(name="noop")
        def noop() -> None:
            pass

        self.task = noop
        return app

    def prepare(self, args) -> str:
        with self.app.open():
            for start in range(0, args.jobs, 5000):
                self.task.batch_defer(*({} for _ in range(min(5000, args.jobs - start))))
        with connect(self.uri) as conn:
            conn.execute("vacuum (analyze) procrastinate_jobs")
        return self.uri

    def check(self, uri: str, args) -> int:
        with connect(uri) as conn:
            return conn.execute(
                "select count(*) as n from procrastinate_jobs where status = 'succeeded'"
                " and id > (select coalesce(max(id), 0) - %s from procrastinate_jobs)",
                (args.jobs,),
            ).fetchone()["n"]
