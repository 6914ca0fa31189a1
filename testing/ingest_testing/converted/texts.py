"""The texts of the converted corpus, all made up: PostgreSQL-manual-style prose and headings
rotated into documents around a distinctive sentence (the phrase a test searches for), the
tables with their phrase in one cell, and the Markdown pandoc turns a document into.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# PostgreSQL-manual-style prose: every document is made of these, rotated, around its
# distinctive sentence.
_PROSE = (
    "Each change to a data page is first written to the write-ahead log, so a crash never loses a committed "
    "transaction.",
    "A checkpoint flushes every dirty buffer to disk and lets the server recycle the oldest WAL segments.",
    "Vacuum reclaims the space held by dead row versions and updates the visibility map of each table.",
    "Autovacuum wakes up once per naptime and picks the tables whose dead tuples passed the threshold.",
    "A B-tree index keeps its keys sorted, which serves equality lookups as well as range scans.",
    "The planner estimates the cost of every candidate plan from the statistics that analyze collects.",
    "A partial index covers only the rows that match its predicate and stays small on large tables.",
    "Streaming replication sends WAL records to the standby as soon as the primary has written them.",
    "A replication slot retains the segments its consumer has not confirmed, even across restarts.",
    "Freezing old transaction identifiers protects the cluster from wraparound long before it happens.",
    "A hot standby answers read-only queries while it replays the changes of the primary.",
    "The free space map records how much room is left on each page, so inserts find a place quickly.",
    "Row-level locks are stored in the tuples themselves, so locking many rows needs no shared memory.",
    "A GIN index maps every lexeme to the rows that contain it and serves full-text search.",
    "Point-in-time recovery replays archived WAL up to the target named in the recovery settings.",
    "The background writer trickles dirty buffers out between checkpoints to smooth the input and output.",
    "Table partitioning routes each row to the partition whose bounds contain its key.",
    "Logical decoding turns WAL records into a stream of row changes that subscribers apply.",
    "A covering index stores extra columns in its leaf pages, which allows index-only scans.",
    "Hint bits remember the outcome of a transaction on the tuple, so later readers skip the commit log.",
    "The statistics collector counts sequential and index scans for every table and index.",
    "Prepared transactions hold their locks until a second phase commits or rolls them back.",
    "A BRIN index summarizes ranges of pages and suits tables that grow in the order of their key.",
    "Connection poolers keep a few server processes busy instead of forking one per client.",
)
_HEADINGS = (
    "Write-ahead logging",
    "Routine vacuuming",
    "Index types",
    "Replication",
    "Recovery",
    "Monitoring",
    "Planner statistics",
    "Concurrency control",
)


@dataclass(frozen=True)
class Text:
    """A document: a title and sections of paragraphs, its distinctive sentence (holding
    the phrase) in the middle."""

    title: str
    sections: tuple[tuple[str, tuple[str, ...]], ...]
    phrase: str


def _document(number: int, title: str, distinctive: str, phrase: str, *, sections: int = 3) -> Text:
    if phrase not in distinctive:
        raise ValueError(f"the phrase {phrase!r} is not in its sentence {distinctive!r}")
    made: list[tuple[str, tuple[str, ...]]] = []
    for index in range(sections):
        heading = _HEADINGS[(number + index) % len(_HEADINGS)]
        paragraphs = [_paragraph(number * 5 + index * 3 + k) for k in range(2)]
        if index == sections // 2:
            paragraphs.insert(
                1, f"{_PROSE[(number + 7) % len(_PROSE)]} {distinctive} {_PROSE[(number + 11) % len(_PROSE)]}"
            )
        made.append((heading, tuple(paragraphs)))
    return Text(title, tuple(made), phrase)


def _paragraph(start: int) -> str:
    return " ".join(_PROSE[(start + k * 5) % len(_PROSE)] for k in range(3))


# One per file: (label, title, distinctive sentence, phrase).
_DOCUMENTS = {
    "docx": (
        "Archiving handbook",
        "The saffron-kestrel archiver copies each finished segment to cold storage before it is recycled.",
        "saffron-kestrel archiver copies each finished segment",
    ),
    "odt": (
        "Vacuum runbook",
        "On the cobalt-marmoset cluster the nightly vacuum runs with a larger maintenance memory budget.",
        "cobalt-marmoset cluster the nightly vacuum",
    ),
    "epub": (
        "Index field guide",
        "The juniper-okapi catalogue keeps a partial index on unshipped orders only.",
        "juniper-okapi catalogue keeps a partial index",
    ),
    "rtf": (
        "Replication memo",
        "The standby called tamarind-gecko lags behind while it replays a large bulk load.",
        "tamarind-gecko lags behind while it replays",
    ),
    "pptx": (
        "Checkpoint tuning review",
        "Spreading checkpoints over the heliotrope-wombat window halved the write spikes.",
        "heliotrope-wombat window halved the write spikes",
    ),
    "odp": (
        "Standby promotion drill",
        "The vermilion-tapir drill promoted the standby in under forty seconds.",
        "vermilion-tapir drill promoted the standby",
    ),
    "eml": (
        "Weekly storage report",
        "Bloat on the quartz-ibis ledger table dropped after the index was rebuilt concurrently.",
        "quartz-ibis ledger table dropped after the index was rebuilt",
    ),
    "eml-attachment": (
        "Rebuild runbook",
        "Rebuild the lagoon-caracal index concurrently so that writes are never blocked.",
        "lagoon-caracal index concurrently so that writes",
    ),
    "pdf": (
        "Recovery targets",
        "Recovery stops at the restore point named ember-pelican that the operator created.",
        "restore point named ember-pelican",
    ),
    "png": (
        "Autovacuum notes",
        "The pewter-lynx table reached its autovacuum threshold twice a day.",
        "pewter-lynx table reached its autovacuum threshold",
    ),
    "jpeg": (
        "Freezing notes",
        "An aggressive freeze of the walnut-bison archive kept wraparound far away.",
        "aggressive freeze of the walnut-bison archive",
    ),
    "tiff": (
        "Replication slot notes",
        "The slot held for the indigo-falcon subscriber retained three days of segments.",
        "slot held for the indigo-falcon subscriber",
    ),
    "pdf-scan": (
        "Partitioning notes",
        "Orders of the russet-narwhal shop are partitioned by month and pruned at plan time.",
        "russet-narwhal shop are partitioned by month",
    ),
}

# Tables: (header, phrase); the phrase is one cell of a middle row.
TABLES = {
    "csv": (
        ("Setting", "Cluster", "Note", "Value"),
        "autumn-gannet replica lag budget",
    ),
    "tsv": (
        ("Index", "Table", "Note", "Size"),
        "mossy-axolotl brin summary range",
    ),
    "xlsx": (
        ("Plan", "Region", "Note", "Seats"),
        "glacier-tarsier failover quota",
    ),
    "ods": (
        ("Job", "Schedule", "Note", "Minutes"),
        "copper-lemur vacuum window",
    ),
}
_TABLE_WORDS = (
    ("shared_buffers", "north", "baseline", "128"),
    ("work_mem", "south", "per sort", "64"),
    ("wal_buffers", "east", "auto sized", "16"),
    ("checkpoint_timeout", "west", "five minutes", "300"),
    ("max_wal_size", "central", "between checkpoints", "1024"),
    ("effective_cache_size", "coast", "planner hint", "4096"),
    ("random_page_cost", "valley", "solid state", "11"),
)


def table(label: str) -> tuple[list[tuple[str, ...]], str]:
    """The rows of the table `label` (its header first) and its phrase."""
    header, phrase = TABLES[label]
    offset = sorted(TABLES).index(label)
    rows: list[tuple[str, ...]] = [header]
    for index in range(len(_TABLE_WORDS)):
        a, b, c, d = _TABLE_WORDS[(index + offset) % len(_TABLE_WORDS)]
        note = phrase if index == len(_TABLE_WORDS) // 2 else f"{c} {label} row {index + 1}"
        rows.append((f"{a}", f"{b}-{label}", note, str(int(d) + index + offset)))
    return rows, phrase


def document_texts() -> dict[str, Text]:
    """Every document of the corpus by its label ("docx", ..., "pdf-scan")."""
    return {
        label: _document(number, title, sentence, phrase)
        for number, (label, (title, sentence, phrase)) in enumerate(_DOCUMENTS.items())
    }


# --- Markdown for pandoc -----------------------------------------------------------------

_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]<>()#+\-.!|~^$&@:;'\"%=])")


def escape_markdown(text: str) -> str:
    """Plain text as Markdown that reads back as exactly that text."""
    return _MARKDOWN_SPECIAL.sub(r"\\\1", text)


def document_markdown(text: Text, *, slides: bool = False) -> str:
    """The document as Markdown (without its title, which pandoc gets as metadata)."""
    parts = []
    for heading, paragraphs in text.sections:
        parts.append(f"# {escape_markdown(heading)}")
        if slides:  # a slide per section, its paragraphs as bullets
            parts.append("\n".join(f"- {escape_markdown(p)}" for p in paragraphs))
        else:
            parts.extend(escape_markdown(p) for p in paragraphs)
    return "\n\n".join(parts) + "\n"
