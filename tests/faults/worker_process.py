"""One fault-run worker process: a real Worker whose RPCs are logged. Run as
`python -m tests.faults.worker_process URL HISTORY LABEL [SLOW_SECONDS]`; SIGTERM stops it
after its jobs in flight."""

from __future__ import annotations

import signal
import sys
import threading
import time
from pathlib import Path

from ingestion_pipeline.db.connection import make_pool
from ingestion_pipeline.settings import load_settings
from ingestion_pipeline.worker import Worker
from tests.faults.rpc_log import HistoryFile, LoggedRpc

FAULT_SETTINGS = {"stale_after_seconds": 3, "heartbeat_interval_seconds": 0.5, "retry_backoff_seconds": 0,
                  "retry_backoff_max_seconds": 0.5, "worker_concurrency": 2, "claim_batch_size": 2,
                  "pool_max_size": 6, "claim_retry_attempts": 20, "connect_timeout_seconds": 5}


class SlowEmbedder:
    """Holds each build for a while (and says so in a marker file), so a test can act on
    a worker that is provably mid-job."""

    name = "slow"
    dimensions = None

    def __init__(self, seconds: float, marker: Path | None):
        self.seconds = seconds
        self.marker = marker

    def embed(self, texts):
        if self.marker is not None:
            self.marker.write_text("embedding")
        time.sleep(self.seconds)
        return None


def main(url: str, history_path: str, label: str, slow_seconds: float = 0.0) -> int:
    settings = load_settings(database_url=url, **FAULT_SETTINGS)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    pool = make_pool(url, settings, application_name=f"fault-{label}")
    marker = Path(history_path).with_suffix(".embedding") if slow_seconds else None
    embedder = SlowEmbedder(slow_seconds, marker) if slow_seconds else None
    rpc = LoggedRpc(pool, HistoryFile(history_path), stale_after_seconds=settings.stale_after_seconds)
    try:
        Worker(pool, settings, label=label, embedder=embedder, rpc=rpc, poll_seconds=0.2).run(drain=False, stop=stop)
    finally:
        pool.close()
    return 0


if __name__ == "__main__":
    args = sys.argv[1:]
    sys.exit(main(args[0], args[1], args[2], float(args[3]) if len(args) > 3 else 0.0))
