"""A small corpus with one topic per document, indexed through the real pipeline (enqueue,
worker, HashEmbedder), and the nearest documents worked out in Python for comparison."""

from __future__ import annotations

import math
import random
from pathlib import Path
from uuid import UUID

from ingestion_pipeline.db.connection import connect
from ingestion_pipeline.processing import HashEmbedder
from tests.old_enqueue import index_files

DIMENSIONS = 64
EMBEDDER = HashEmbedder(DIMENSIONS)

TOPICS = {
    "otters.txt": "otter river fur swim whiskers den holt fish playful stream",
    "lighthouse.txt": "lighthouse keeper lamp beacon coast fog signal tower lens storm",
    "tea.txt": "tea leaves brew steep kettle oolong green kettle infusion cup",
    "volcano.txt": "volcano lava magma eruption crater ash basalt vent caldera plume",
    "violin.txt": "violin bow strings rosin bridge fiddle concerto luthier scroll tune",
    "bread.txt": "bread dough yeast flour knead crust oven loaf sourdough proof",
    "glacier.txt": "glacier ice moraine crevasse snow firn melt valley cirque frozen",
    "chess.txt": "chess pawn bishop knight rook castle checkmate gambit opening board",
    "orbit.txt": "orbit satellite rocket gravity apogee perigee launch thrust payload trajectory",
    "bees.txt": "bees hive honey pollen queen comb nectar swarm beekeeper wax",
    "compiler.txt": "compiler parser token syntax lexer grammar optimizer bytecode register linker",
    "sailing.txt": "sailing mast keel rudder tack jib harbour wind hull anchor",
}
FILLER = "the a of and in with on for it is was that by from at as"

QUERIES = {  # query text -> the document it is about
    "otter swims in the river stream": "otters.txt",
    "keeper lights the lamp of the lighthouse tower": "lighthouse.txt",
    "steep green tea in a kettle": "tea.txt",
    "lava from the volcano crater": "volcano.txt",
    "rosin on the violin bow": "violin.txt",
    "knead the sourdough bread dough": "bread.txt",
    "crevasse in the glacier ice": "glacier.txt",
    "knight and bishop checkmate": "chess.txt",
}


def topic_text(name: str, paragraphs: int = 6, seed: int = 0) -> str:
    """Paragraphs of the topic's words among common ones: several chunks per document."""
    rng = random.Random(f"{name}-{seed}")
    words, filler = TOPICS[name].split(), FILLER.split()
    return "\n\n".join(
        " ".join(rng.choice(words) if rng.random() < 0.5 else rng.choice(filler) for _ in range(200))
        for _ in range(paragraphs)
    )


def write_corpus(folder: Path, names: list[str] | None = None, paragraphs: int = 6) -> Path:
    """One file per topic; 6 paragraphs make ~8 chunks a document, 50 make ~50."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in names or list(TOPICS):
        (folder / name).write_text(topic_text(name, paragraphs=paragraphs))
    return folder


def index_folder(url: str, folder: Path, embedder=EMBEDDER) -> dict[str, UUID]:
    """Enqueue the folder and drain it with the worker; file name -> document id. The
    worker's client speaks schemas before its window too (a test migrates to before pgvector)."""
    report, result = index_files(url, [folder], embedder=embedder, batch_name="vector corpus")
    queued = [entry for entry in report.files if entry.job_id is not None]
    assert result.counts.get("completed") == len(queued), [r.message for r in result.results]
    return {Path(entry.path).name: entry.document_id for entry in report.files}


def embed(text: str) -> list[float]:
    return EMBEDDER.embed([text])[0]


def expected_ranking(url: str, vector: list[float]) -> list[tuple[str, float]]:
    """(source name, mean cosine similarity of its chunks) per document, best first, computed
    here from the committed chunks re-embedded (title, heading path and text, as the worker
    embeds them): what either SQL path must return (migration 20261205000300)."""
    with connect(url) as conn:
        rows = conn.execute(
            "select d.source_name, c.title, c.heading, c.content"
            "  from committed_document_chunks c join documents d on d.id = c.document_id"
        ).fetchall()
    scores: dict[str, list[float]] = {}
    for row in rows:
        score = cosine(vector, embed(embedded_text(row)))
        if score is not None:
            scores.setdefault(row["source_name"], []).append(score)
    means = {name: sum(values) / len(values) for name, values in scores.items()}
    return sorted(means.items(), key=lambda item: -item[1])


def embedded_text(chunk: dict) -> str:
    """What the worker embeds for a chunk row (processing.embedding.embedding_texts)."""
    return "\n".join(part for part in (chunk["title"], chunk["heading"], chunk["content"]) if part)


def cosine(a: list[float], b: list[float]) -> float | None:
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return sum(x * y for x, y in zip(a, b, strict=True)) / norm if norm else None
