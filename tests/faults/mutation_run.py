"""A scratch run for the checker's mutation tests (test_checker_mutations.py,
test_bulk_answers.py): the deletion audit installed, a logged worker, janitor and operator
on connections of their own, their histories in one folder, and the steps a test takes to
inject one fault through them."""

from __future__ import annotations

import time
from pathlib import Path

import psycopg

from ingestion_pipeline.db.connection import connect, make_pool
from ingestion_pipeline.processing import chunk_sections, parse
from ingestion_pipeline.settings import load_settings
from ingestion_pipeline.worker import Worker
from ingestion_pipeline.worker.artifacts import write_generation
from tests.faults.checker import check
from tests.faults.harness import SOURCE_KEY_PREFIX, ChaosStats, Janitor, install_deletion_audit, seed_documents
from tests.faults.rpc_log import OPERATOR, HistoryFile, LoggedRpc
from tests.helpers import seed_document


class Run:
    """A scratch run: the deletion audit installed, a logged worker rpc on one
    connection, a logged janitor on another, histories in `folder`."""

    def __init__(self, url: str, folder: Path):
        self.url, self.folder = url, folder
        install_deletion_audit(url)
        self.conn = connect(url)
        self.rpc = LoggedRpc(self.conn, HistoryFile(str(folder / "w1.jsonl")))
        self.janitor_conn = connect(url)
        self.janitor = LoggedRpc(self.janitor_conn, HistoryFile(str(folder / "janitor.jsonl")))
        self.operator_conn = connect(url)
        self.operator = LoggedRpc(self.operator_conn, HistoryFile(str(folder / "operator.jsonl")), caller=OPERATOR)

    def histories(self) -> list[Path]:
        return sorted(self.folder.glob("*.jsonl"))

    def check(self):
        return check(self.url, self.histories())

    def seed(self, count: int = 1, *, batch: bool = True, max_attempts: int = 3):
        """Documents with one pending job each (in one batch, or none); their ids."""
        if batch:
            seed_documents(self.url, count, 1, max_attempts=max_attempts, run_tag=f"{time.monotonic_ns()}-")
            return [
                r["id"]
                for r in self.conn.execute("select id from documents order by created_at desc limit %s", (count,))
            ]
        ids = []
        for _ in range(count):
            document_id = seed_document(self.conn)
            assert self.rpc.enqueue(document_id, max_attempts=max_attempts).ok
            ids.append(document_id)
        return ids

    def put(self, name: str, text: str, *, max_attempts: int = 3):
        """`text` enqueued as the file `name`, under its key, by the operator (new_version:
        a new document, or a new version of it); the answer."""
        answer = self.operator.new_version(
            self.operator_conn,
            content=text.encode(),
            collection="default",
            source_key=SOURCE_KEY_PREFIX + name,
            source_name=name,
            mime_type="text/plain",
            max_attempts=max_attempts,
        )
        assert answer.ok, answer
        return answer

    def drain(self) -> None:
        """A real worker processes every pending job (its calls in the history)."""
        settings = load_settings(database_url=self.url, retry_backoff_seconds=0)
        with make_pool(self.url, settings) as pool:
            rpc = LoggedRpc(pool, HistoryFile(str(self.folder / "w2.jsonl")), caller="w2")
            Worker(pool, settings, rpc=rpc, poll_seconds=0.05).run(drain=True)

    def claim(self, worker: str = "w1"):
        [job] = self.rpc.claim(worker)
        return job

    def begin(self, job, worker: str = "w1"):
        begun = self.rpc.begin_generation(job.job_id, job.document_id, worker, lease_token=job.lease_token)
        assert begun.ok, begun
        return begun.generation_id

    def write_parsed(self, job, generation_id, worker: str = "w1") -> BaseException | None:
        """The rows a real build writes for this document (a re-parse of its source),
        logged as an artifact write; the database's refusal is returned, not raised."""
        row = self.conn.execute(
            "select d.source_name, s.content from documents d join document_sources s "
            "on s.document_id = d.id where d.id = %s",
            (job.document_id,),
        ).fetchone()
        parsed = parse(bytes(row["content"]), row["source_name"], max_bytes=10_000_000)
        started, error = time.time(), None
        try:
            write_generation(
                self.conn, job.document_id, generation_id, parsed, chunk_sections(parsed.sections), lambda: None
            )
        except psycopg.Error as exc:
            error = exc
        self.rpc.record_write(generation_id, started, error)
        return error

    def fail(self, job, worker: str = "w1"):
        outcome = self.rpc.fail_or_retry(
            job.job_id,
            job.document_id,
            worker_id=worker,
            lease_token=job.lease_token,
            retry=False,
            error_message="given up",
            batch_id=job.batch_id,
        )
        assert outcome.ok, outcome
        return outcome

    def final_janitor_pass(self) -> ChaosStats:
        """The harness's last pass: its cleanup runs until nothing is left."""
        stats = ChaosStats()
        assert Janitor(self.url, self.folder / "janitor.jsonl", stats).run_pass(final=True), stats.janitor_errors
        return stats

    def close(self) -> None:
        self.conn.close()
        self.janitor_conn.close()
        self.operator_conn.close()
