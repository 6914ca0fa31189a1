"""Error classes the worker acts on, and the text a job's error becomes (printable)."""

from __future__ import annotations

import ast
import re

import psycopg

from ingestion_pipeline.errors import ARTIFACT_FENCE_SQLSTATE
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


# A library's message may quote the damaged file: Python's repr of bytes (b'\xcb…'), escapes
# of characters (\x00, \u0000), control characters, or text decoded from the wrong charset.
# (A literal cut short, as a library's excerpt may be, runs to the end of the line.)
_BYTES_LITERAL = re.compile(r"""(?<!\w)b(?:'(?:[^'\\\n]|\\.)*(?:'|$)|"(?:[^"\\\n]|\\.)*(?:"|$))""", re.MULTILINE)
_ESCAPES = re.compile(r"(?:\\x[0-9a-fA-F]{2}|\\u[0-9a-fA-F]{4}|\\U[0-9a-fA-F]{8})+")
ERROR_TEXT_LIMIT = 500  # characters: a person reads it in `ingest status`, the UI, a JSON answer


def printable(message: str, limit: int = ERROR_TEXT_LIMIT) -> str:
    """A job's error as a person reads it: one line of printable text, at most `limit`
    characters. The bytes a library quotes from a damaged file are said, not shown
    (`[1 byte]`), and so are escaped or unprintable characters (`?`)."""
    text = _BYTES_LITERAL.sub(_bytes_said, message[: limit * 20])
    text = _ESCAPES.sub("?", text)
    text = "".join(ch if ch.isprintable() and ch != "\ufffd" else ("?" if not ch.isspace() else " ") for ch in text)
    text = re.sub(r"\?{2,}", "?", " ".join(text.split()))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _bytes_said(match: re.Match[str]) -> str:
    try:
        size = len(ast.literal_eval(match.group()))
    except (ValueError, SyntaxError):
        return "[bytes]"
    return f"[{size} byte{'' if size == 1 else 's'}]"
