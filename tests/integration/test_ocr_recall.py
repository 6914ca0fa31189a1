"""OCR through the whole pipeline: pages of known prose, printed by LibreOffice and scanned
at 150 dpi (a PNG page and a two-page image-only PDF, ingest_testing.converted),
are indexed, and the indexed text holds at least 95% of the source's words.

Recall: the fraction of the source's words (lowercased, split at anything that is not a
letter or digit, so punctuation is dropped) found among the indexed words, counted as a
multiset (a word the source has three times must be read three times)."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from ingest_testing.converted import SCAN_TOOLS, ConvertedFile, ScanSource, make_scans
from ingestion_pipeline.db.connection import connect
from tests.helpers import index_folder
from tests.tools import require_tools

MIN_RECALL = 0.95

LETTER = ScanSource(
    name="harbour-letter",
    kind="png",
    pages=(
        """The harbour town wakes early in the autumn. Before the sun clears the hills, the fishing boats
are already moving past the old stone pier, and the gulls follow them out toward the grey water.
The baker on the corner opens her shutters at six, and the smell of fresh bread drifts down the
narrow street to the market square.

By eight o'clock the square is full. Farmers arrive from the valley with apples, pears and baskets
of late tomatoes. A man sells honey from a wooden cart, and children gather around the fountain to
watch the pigeons. The church bell rings the hour, and nobody seems to be in a hurry.

In the afternoon the wind turns and the clouds come in from the west. Shopkeepers pull their
awnings back, and the cafe owner stacks the chairs that stood outside all morning. When the rain
finally arrives, it is gentle and warm, and most people simply keep walking.""",
    ),
    phrase="the fishing boats are already moving past the old stone pier",
)

JOURNAL = ScanSource(
    name="river-journal",
    kind="pdf",
    pages=(
        """We left the village on a Tuesday, carrying two small bags and a map that was older than both
of us. The river ran beside the road for the first few miles, wide and slow, with willows leaning
over the water. Every so often a heron stood motionless in the shallows, waiting for something we
could not see.

At noon we stopped at a farmhouse and asked for water. The woman who answered the door gave us a
jug of milk instead, and bread with butter, and would not take any money. Her husband was mending
a fence in the field behind the house, and he waved his hat at us when we left.

The road climbed after that. The river fell away below us into a green valley, and the air grew
cooler with every turn. By evening our legs were tired, but the view from the top of the pass was
worth every step of the climb.""",
        """The inn at the top of the pass had six rooms and a kitchen that smelled of onions and wood
smoke. The landlord told us that the road ahead was closed for repairs, and that we would have to
take the old mule track through the forest instead. He drew the path for us on the back of a
receipt, with a cross where a bridge had washed away in the spring.

We set out the next morning under a clear sky. The forest was quiet, except for the wind in the
pines and the sound of our own boots on the stones. Twice we lost the track and had to double back,
and once we surprised a family of deer drinking from a stream.

Late in the afternoon the trees opened onto a meadow full of yellow flowers. Below us, at the end
of a long and winding valley, we could see the roofs of the town where our journey would end.""",
    ),
    phrase="take the old mule track through the forest instead",
)


def words(text: str) -> list[str]:
    return re.findall(r"[0-9a-z]+", text.lower())


def recall(source: str, indexed: str) -> float:
    wanted, read = Counter(words(source)), Counter(words(indexed))
    return sum(min(count, read[word]) for word, count in wanted.items()) / sum(wanted.values())


@pytest.fixture(scope="module")
def scans(tmp_path_factory) -> tuple[Path, list[ConvertedFile]]:
    require_tools(SCAN_TOOLS, "scanning pages and reading them")
    folder = tmp_path_factory.mktemp("scans")
    return folder, make_scans(folder, [LETTER, JOURNAL])


@pytest.mark.one_server  # parsing is the subject, not the server's SQL: run once
def test_scanned_pages_are_read_with_high_word_recall(scans, db_url, capsys):
    folder, files = scans
    source_words = sum(len(words(f.source_text or "")) for f in files)
    assert source_words >= 300, source_words
    drained = index_folder(folder, db_url)
    capsys.readouterr()
    with connect(db_url) as conn:
        rows = conn.execute(
            """
            select d.source_name, d.status, d.error_message, count(p.ordinal) as pages,
                   coalesce(string_agg(p.content, ' ' order by p.ordinal), '') as text
              from documents d
              left join document_pages p on p.document_id = d.id and p.index_generation_id = d.index_generation_id
             group by d.id
            """
        ).fetchall()
    indexed = {row["source_name"]: row for row in rows}
    assert sorted(indexed) == sorted(f.path.name for f in files)
    measured = {}
    for file in files:
        row = indexed[file.path.name]
        assert row["status"] == "indexed", (file.path.name, row["status"], row["error_message"])
        measured[file.path.name] = (recall(file.source_text or "", row["text"]), row["pages"])
    total = recall(" ".join(f.source_text or "" for f in files), " ".join(row["text"] for row in rows))
    with capsys.disabled():
        for name, (value, pages) in measured.items():
            print(f"\nOCR word recall {name} ({pages} page(s)): {value:.3f}", end="")
        print(f"\nOCR word recall overall ({source_words} source words): {total:.3f}; indexed in {drained:.1f} s")
    low = {name: value for name, (value, _) in measured.items() if value < MIN_RECALL}
    assert low == {}, f"word recall below {MIN_RECALL}: {low}; indexed text: " + repr(
        {name: indexed[name]["text"] for name in low}
    )
    pages_of = {source.name: len(source.pages) for source in (LETTER, JOURNAL)}
    assert {name: pages for name, (_, pages) in measured.items()} == {f.path.name: pages_of[f.path.stem] for f in files}
