"""Error classes the worker acts on; a job's error text is `printable` (errors.py)."""

from __future__ import annotations

import psycopg

from ingestion_pipeline.errors import ARTIFACT_FENCE_SQLSTATE, ERROR_TEXT_LIMIT, printable
from ingestion_pipeline.processing import EmbeddingUnavailable


class LeaseLost(Exception):
    """The claim is over: another worker holds the job now, or an operator cancelled it
    (the document was deleted, its batch cancelled). Stop at once, write nothing more."""


class WorkerFault(Exception):
    """The worker's parsing processes failed under the job (its child killed, the pool's
    manager or fork server gone): not the document's doing, as far as one fault can tell.
    The job is released, its attempt refunded (within the job's bound on worker faults)."""


def is_build_refused(exc: BaseException) -> bool:
    """The database refused this claim's artifact rows: the fence (IF001), or a foreign
    key (23503) because the generation or document is gone, which the guarded cleanup
    allows only once no job of the document is open, i.e. after this claim lost it."""
    return isinstance(exc, psycopg.Error) and (
        exc.sqlstate == ARTIFACT_FENCE_SQLSTATE or isinstance(exc, psycopg.errors.ForeignKeyViolation)
    )


# Failures worth another attempt: the next one may well succeed.
TRANSIENT_ERRORS: tuple[type[BaseException], ...] = (
    psycopg.OperationalError,  # connection lost, server restarting, admin shutdown
    psycopg.InterfaceError,  # connection closed under us
    psycopg.errors.SerializationFailure,
    psycopg.errors.DeadlockDetected,
    psycopg.errors.LockNotAvailable,
    psycopg.errors.QueryCanceled,  # statement_timeout
    TimeoutError,
    ConnectionError,
    EmbeddingUnavailable,  # rate limited, overloaded or unreachable after the client's own retries
)


def is_transient(exc: BaseException) -> bool:
    return isinstance(exc, TRANSIENT_ERRORS)


def describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return printable(f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__)


__all__ = [
    "ERROR_TEXT_LIMIT",
    "TRANSIENT_ERRORS",
    "LeaseLost",
    "WorkerFault",
    "describe",
    "is_build_refused",
    "is_transient",
    "printable",
]
