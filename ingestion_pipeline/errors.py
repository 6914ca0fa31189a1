"""Errors that the `ingest` command reports as one line, without a traceback; and the
project's own SQLSTATEs, each with what it becomes on this side."""

import shlex

# Our own SQLSTATEs (class IF), raised by the migrations' plpgsql. The standard ones the RPCs
# raise are 22023 (invalid_parameter_value: a bad argument, a call with no fence) and the
# serialization/deadlock class 40, which the worker retries as transient.
ARTIFACT_FENCE_SQLSTATE = "IF001"  # artifact rows refused by the fence: the worker's LeaseLost
BATCH_CANCELLED_SQLSTATE = "IF002"  # an enqueue into a cancelled batch: BatchWasCancelled
OPEN_JOB_CHANGED_SQLSTATE = "IF003"  # raised and caught inside delete_document; never reaches a client


class IngestError(Exception):
    """A problem the user can act on; its message is the whole story."""


class ConfigError(IngestError):
    """A setting has a bad value."""


class UnknownCollection(IngestError):
    """A command or call named a collection that does not exist (a typo, most often): one
    message wherever a collection is read (`ingest collection grant`, `search`, `status`, …).
    To an app's reader (`to_reader`) it names a collection the reader may not read, whether it
    exists or not, in words that do not say which: `no collection 'x'`, without the owner's hint."""

    def __init__(self, name: str, *, to_reader: bool = False):
        self.name = name
        hint = (
            ""
            if to_reader
            else f": `ingest collection add {shlex.quote(name)}` creates it (`ingest collection list` shows them)"
        )
        super().__init__(f"no collection {name!r}{hint}")


class DatabaseUnavailable(IngestError):
    """The database could not be reached or the URL is unusable."""


class BatchWasCancelled(IngestError):
    """The import batch was cancelled: it takes no new files (SQLSTATE IF002)."""


class MigrationError(IngestError):
    """The migration plan is unsafe to apply (changed, missing or out-of-order files)."""


class SchemaTooOld(IngestError):
    """The database's schema is older than the client's support window (db/schema_level.py)."""


def first_line(exc: BaseException) -> str:
    """An exception as one line: its message's first line, or its type's name."""
    text = str(exc).strip()
    return (text.splitlines()[0] if text else "") or type(exc).__name__
