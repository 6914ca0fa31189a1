"""Errors that the `ingest` command reports as one line, without a traceback; the project's
own SQLSTATEs, each with what it becomes on this side; and `printable`, what any error's text
becomes before a person reads it."""

import ast
import difflib
import re
import shlex
from collections.abc import Iterable

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
    message wherever a collection is read (`ingest collection grant`, `search`, `status`, …),
    naming the closest of the collections the caller may read (`near`: `did you mean
    'pgdocs'?`). To an app's reader (`to_reader`) it names a collection the reader may not
    read, whether it exists or not, in words that do not say which: `no collection 'x'`,
    without the owner's hint, its `near` drawn from the reader's collections only."""

    def __init__(self, name: str, *, to_reader: bool = False, near: Iterable[str] = ()):
        self.name, self.near = name, list(near)
        guess = f"did you mean {either(self.near)}?" if self.near else ""
        creates = f"`ingest collection add {shlex.quote(name)}` creates it"
        if to_reader:
            hint = f": {guess}" if guess else ""
        else:
            hint = f": {guess} ({creates})" if guess else f": {creates} (`ingest collection list` shows them)"
        super().__init__(f"no collection {name!r}{hint}")

    @classmethod
    def among(cls, name: str, names: Iterable[str], *, to_reader: bool = False) -> "UnknownCollection":
        """The error for `name`, its suggestions drawn from `names` (those the caller may read)."""
        return cls(name, to_reader=to_reader, near=near_names(name, names))


class NearCollection(IngestError):
    """A write would create a collection whose name is a small edit from an existing one's (a
    typo, most often: `kitchn` beside `kitchen`): refused, nothing written, unless the new name
    is confirmed (`--new-collection`, `new_collection=True`)."""

    def __init__(self, name: str, near: Iterable[str]):
        self.name, self.near = name, list(near)
        super().__init__(
            f"no collection {name!r}: did you mean {either(self.near)}? Nothing was written; to create "
            f"{name!r}, confirm it (--new-collection; new_collection=True in Python)"
        )


SUGGESTION_CUTOFF = 0.6  # difflib's ratio for a name suggested in an error
TYPO_CUTOFF = 0.85  # and for a new name refused as a likely typo of an existing one


def near_names(name: str, names: Iterable[str], *, cutoff: float = SUGGESTION_CUTOFF, most: int = 3) -> list[str]:
    """The names of `names` closest to `name`, case aside: best first (difflib's ratio), then
    by name."""
    matcher = difflib.SequenceMatcher(b=name.lower())
    scored = []
    for other in set(names) - {name}:
        matcher.set_seq1(other.lower())
        if matcher.real_quick_ratio() >= cutoff and matcher.quick_ratio() >= cutoff and matcher.ratio() >= cutoff:
            scored.append((-matcher.ratio(), other))
    return [other for _, other in sorted(scored)[:most]]


def typo_of(name: str, names: Iterable[str]) -> list[str]:
    """The existing names a new `name` is likely a typo of: within a small edit (or a change of
    case), unless they differ only in their numbers (`tenant-02` beside `tenant-01`, `docs2`
    beside `docs`) or in one letter standing alone (`team-b` beside `team-a`): those are meant."""
    return [other for other in near_names(name, names, cutoff=TYPO_CUTOFF) if not _meant_apart(name, other)]


_DIGITS = re.compile(r"\d+")
_SEPARATORS = re.compile(r"[-_. ]+")


def _meant_apart(one: str, other: str) -> bool:
    one, other = one.lower(), other.lower()
    if _DIGITS.sub("", one) == _DIGITS.sub("", other) and _DIGITS.findall(one) != _DIGITS.findall(other):
        return True
    words, others = _SEPARATORS.split(one), _SEPARATORS.split(other)
    differ = [(a, b) for a, b in zip(words, others, strict=False) if a != b]
    return len(words) == len(others) and len(differ) == 1 and len(differ[0][0]) == len(differ[0][1]) == 1


def either(names: list[str]) -> str:
    """'a', "'a' or 'b'", "'a', 'b' or 'c'"."""
    quoted = [repr(name) for name in names]
    return quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"


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


# A library's message may quote the damaged file: Python's repr of bytes (b'\xcb…'), escapes
# of characters (\x00, \u0000), control characters, or text decoded from the wrong charset.
# (A literal cut short, as a library's excerpt may be, runs to the end of the line.)
_BYTES_LITERAL = re.compile(r"""(?<!\w)b(?:'(?:[^'\\\n]|\\.)*(?:'|$)|"(?:[^"\\\n]|\\.)*(?:"|$))""", re.MULTILINE)
_ESCAPES = re.compile(r"(?:\\x[0-9a-fA-F]{2}|\\u[0-9a-fA-F]{4}|\\U[0-9a-fA-F]{8})+")
ERROR_TEXT_LIMIT = 500  # characters: a person reads it in `ingest status`, the UI, a JSON answer


def printable(message: str, limit: int = ERROR_TEXT_LIMIT) -> str:
    """An error as a person reads it (a job's, a parser's, a note's): one line of printable
    text, at most `limit` characters. The bytes a library quotes from a damaged file are
    said, not shown (`[1 byte]`), and so are escaped or unprintable characters (`?`)."""
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
