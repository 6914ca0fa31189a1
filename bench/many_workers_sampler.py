"""What the parent of many_workers.py watches: lock waits and connections on the scratch
database (a sampler thread on its own connection), and the server's connection budget."""

from __future__ import annotations

import threading
import time
from collections import Counter

from common import connect

# -- in the parent: the lock-wait and connection sampler -------------------------------

SAMPLE_SQL = r"""
with a as (
    select pid, backend_type, wait_event_type, wait_event, query_start,
           coalesce(substring(query from '([a-z_]+_ingestion_[a-z_]+)\s*\('), 'other') as rpc
      from pg_stat_activity
     where datname = %(db)s
)
select (select count(*) from a where backend_type = 'client backend')::int as clients,
       (select coalesce(json_agg(json_build_object('pid', pid, 'event', wait_event, 'since', query_start,
                                                   'rpc', rpc)), '[]')
          from a where wait_event_type = 'Lock') as waiting,
       (select count(*) from pg_locks l join a using (pid) where not l.granted)::int as ungranted
"""


class Sampler(threading.Thread):
    """Samples the scratch database's sessions every `interval` seconds until stopped."""

    def __init__(self, server_uri: str, dbname: str, interval: float):
        super().__init__(daemon=True)
        self.server_uri, self.dbname, self.interval = server_uri, dbname, interval
        self.samples = 0
        self.with_waiters = 0
        self.waiting_backend_samples = 0
        self.waits: set[tuple] = set()
        self.events: Counter = Counter()  # (waiting RPC, wait_event) of each distinct wait seen
        self.peak_waiting = 0
        self.peak_ungranted = 0
        self.peak_clients = 0
        self.error: str | None = None
        self._stop_event = threading.Event()

    def run(self) -> None:
        try:
            with connect(self.server_uri, application_name="bench-many-sampler") as conn:
                next_at = time.monotonic()
                while not self._stop_event.is_set():
                    row = conn.execute(SAMPLE_SQL, {"db": self.dbname}).fetchone()
                    self._add(row)
                    next_at += self.interval
                    self._stop_event.wait(max(0.0, next_at - time.monotonic()))
        except Exception as exc:  # noqa: BLE001 - reported with the row; the run itself goes on
            self.error = f"{type(exc).__name__}: {exc}"

    def _add(self, row: dict) -> None:
        self.samples += 1
        waiting = row["waiting"]
        self.peak_clients = max(self.peak_clients, row["clients"])
        self.peak_ungranted = max(self.peak_ungranted, row["ungranted"])
        self.peak_waiting = max(self.peak_waiting, len(waiting))
        if waiting:
            self.with_waiters += 1
            self.waiting_backend_samples += len(waiting)
        for w in waiting:
            key = (w["pid"], w["since"])
            if key not in self.waits:
                self.waits.add(key)
                self.events[(w["rpc"], w["event"])] += 1

    def stop(self) -> None:
        self._stop_event.set()
        self.join()


# -- the connection budget ---------------------------------------------------------------

BUDGET_SQL = """
select current_setting('max_connections')::int as max_connections,
       current_setting('superuser_reserved_connections')::int as superuser_reserved,
       coalesce(current_setting('reserved_connections', true), '0')::int as reserved,
       (select count(*) from pg_stat_activity
         where backend_type = 'client backend' and pid <> pg_backend_pid())::int as in_use
"""


def connection_budget(server_uri: str) -> dict:
    with connect(server_uri) as conn:
        row = conn.execute(BUDGET_SQL).fetchone()
    row["available"] = row["max_connections"] - row["superuser_reserved"] - row["reserved"] - row["in_use"]
    return row


def needed(processes: int, pool_size: int) -> int:
    return processes * pool_size + 1  # + the sampler


def budget_line(budget: dict, counts: list[int], dagster_runs: int, pool_size: int) -> str:
    cells = [f"{n}->{needed(n, pool_size)}" for n in counts]
    if dagster_runs:
        cells.append(f"dagster {dagster_runs}->{needed(dagster_runs, pool_size)}")
    return (
        f"connection budget: max_connections {budget['max_connections']} - reserved "
        f"{budget['superuser_reserved'] + budget['reserved']} (superuser_reserved_connections "
        f"{budget['superuser_reserved']}, reserved_connections {budget['reserved']}) - "
        f"{budget['in_use']} client backend(s) already connected = {budget['available']} available; "
        f"a count needs processes x pool {pool_size} + 1 sampler: {', '.join(cells)}"
    )


def refusal(label: str, processes: int, pool_size: int, budget: dict) -> str | None:
    need = needed(processes, pool_size)
    if need <= budget["available"]:
        return None
    return (
        f"{label}: refused: needs {need} connections ({processes} x pool {pool_size} + 1 sampler), "
        f"the server has {budget['available']} available; lower --pool-size or the count"
    )
