"""Errors that the `ingest` command reports as one line, without a traceback."""


class IngestError(Exception):
    """A problem the user can act on; its message is the whole story."""


class ConfigError(IngestError):
    """A setting has a bad value."""


class DatabaseUnavailable(IngestError):
    """The database could not be reached or the URL is unusable."""


class BatchWasCancelled(IngestError):
    """The import batch was cancelled: it takes no new files (SQLSTATE IF002)."""


class MigrationError(IngestError):
    """The migration plan is unsafe to apply (changed, missing or out-of-order files)."""
