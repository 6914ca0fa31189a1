"""The one exception processing raises for a document that can never succeed."""


class ProcessingError(Exception):
    """A permanent failure: retrying the same bytes gives the same result.

    The message is shown to the person who uploaded the file, so it says what is wrong
    with the file in plain words ("file is empty", "encrypted PDF"), never a traceback.
    Anything else raised from processing is a bug or a transient problem, which the
    worker may retry.
    """

    # The document's type when it was known before the failure (parse sets it), for reports.
    mime_type: str | None = None


class EmbeddingRejected(ProcessingError):
    """The embedding endpoint refused the request for a reason a retry does not change (a bad
    key, an unknown model, a request it cannot serve) or answered something unusable (the
    wrong number or size of vectors). The message names the setting to fix."""


class EmbeddingUnavailable(Exception):
    """The embedding endpoint could not answer now (rate limited, overloaded, unreachable,
    too slow), after the client's own retries: the job is retried later by the queue."""
