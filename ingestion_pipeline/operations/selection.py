"""Which files of a folder or a source are taken: by default its documents, those whose suffix
is one of a format the parsers read (processing/suffixes.py); the others (stylesheets, scripts,
SVG pictures, fonts, …) are passed over without a read and counted by kind, for the report's
`skipped: 1 stylesheet, 3 SVG images`. Globs choose otherwise: `include` takes the files that
match one of them, whatever they are, instead of the documents; `exclude` passes over the files
that match one, documents too. A glob without `/` matches a file's name, one with `/` its path
below the folder or source (`*` crosses `/` there: `drafts/*` is everything under drafts/);
both ignore case. A file named by itself (`ingest enqueue x.css`) is not chosen among others:
it is always tried, and its bytes decide."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from fnmatch import fnmatchcase

from ingestion_pipeline.processing.suffixes import is_document_name, kind_of

Kind = tuple[str, str]  # what one and several such files are called
EXCLUDED: Kind = ("excluded file", "excluded files")
NOT_INCLUDED: Kind = ("file not included", "files not included")


@dataclass(frozen=True)
class Selection:
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()

    @classmethod
    def of(cls, include: Iterable[str] | str | None = None, exclude: Iterable[str] | str | None = None) -> Selection:
        return cls(_globs(include), _globs(exclude))

    def passed_over(self, relative: str) -> Kind | None:
        """None when the file at `relative` (its path below the folder, `/`-separated) is
        taken; otherwise what it is counted as."""
        name = relative.rsplit("/", 1)[-1]
        if any(_matches(glob, relative, name) for glob in self.exclude):
            return EXCLUDED
        if self.include:
            return None if any(_matches(glob, relative, name) for glob in self.include) else NOT_INCLUDED
        return None if is_document_name(name) else kind_of(name)

    def as_dict(self) -> dict[str, list[str]]:
        return {"include": list(self.include), "exclude": list(self.exclude)}


ALL_DOCUMENTS = Selection()


def _globs(value: Iterable[str] | str | None) -> tuple[str, ...]:
    if value is None:
        return ()
    globs = (value,) if isinstance(value, str) else tuple(value)
    return tuple(glob.strip().lstrip("/") for glob in globs if glob.strip())


def _matches(glob: str, relative: str, name: str) -> bool:
    subject = relative if "/" in glob else name
    return fnmatchcase(subject.lower(), glob.lower())


@dataclass
class PassedOver:
    """The files passed over, counted by kind."""

    counts: Counter[Kind] = field(default_factory=Counter)

    def add(self, kind: Kind) -> None:
        self.counts[kind] += 1

    def __bool__(self) -> bool:
        return bool(self.counts)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def by_kind(self) -> dict[str, int]:
        """{"stylesheet": 1, "SVG image": 3}: the most first."""
        return {kind[0]: n for kind, n in self._ordered()}

    def __str__(self) -> str:
        """`1 stylesheet, 3 SVG images`"""
        return ", ".join(f"{n} {kind[0] if n == 1 else kind[1]}" for kind, n in self._ordered())

    def _ordered(self) -> list[tuple[Kind, int]]:
        return sorted(self.counts.items(), key=lambda item: (-item[1], item[0][0]))


def skipped_line(passed: PassedOver) -> str:
    """The report's line: what was passed over, and how to choose otherwise."""
    return f"skipped: {passed} (--include/--exclude GLOB choose the files taken)"
