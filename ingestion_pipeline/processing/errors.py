"""The one exception processing raises for a document that can never succeed."""


class ProcessingError(Exception):
    """A permanent failure: retrying the same bytes gives the same result.

    The message is shown to the person who uploaded the file, so it says what is wrong
    with the file in plain words ("file is empty", "encrypted PDF"), never a traceback.
    Anything else raised from processing is a bug or a transient problem, which the
    worker may retry.
    """
