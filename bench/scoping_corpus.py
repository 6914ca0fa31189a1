"""The corpus of search_scoping.py: generated prose (a word-bigram model of a third of the
relevance pages per collection, made-up names as the rarest terms), written as one folder
per collection, and its build through `ingest enqueue` and `ingest work --drain` (reused
while the schema and the corpus are the same)."""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import psycopg
from common import ROOT, db_uri

# The prose the corpus is made from: the relevance test's pages (fixtures: they change only
# with that test, so a build is the same text on every server and at every commit).
SOURCES = sorted((ROOT / "tests" / "fixtures" / "relevance" / "pages").glob("*.html"))


def connect(uri: str) -> psycopg.Connection:
    """Autocommit, no prepared statements (as the package connects)."""
    return psycopg.connect(uri, autocommit=True, prepare_threshold=None)


# -- the corpus -----------------------------------------------------------------------

WORD = re.compile(r"[A-Za-z][A-Za-z'-]*[A-Za-z]|[A-Za-z]")
SYLLABLES = (
    "ka lo mi ra ven tor sil bar que del ost fin gar hul wen dra pel zan mor tis lun bex cor val "
    "nim pra sto gle fal rin dus hal kes mar ob ul yst ara ione"
).split()


def source_sentences(path: Path) -> list[list[str]]:
    """The prose of one HTML page as sentences of words (its <pre> blocks dropped)."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(path.read_text("utf-8"), "html.parser")
    for pre in soup.find_all("pre"):
        pre.decompose()
    sentences = []
    for piece in re.split(r"(?<=[.!?:;])\s+|\n\s*\n", soup.get_text(" ")):
        words = WORD.findall(piece)
        if len(words) >= 4:
            sentences.append(words)
    return sentences


class Chain:
    """A word-bigram model: each word's successors as a list (repeats keep the frequencies)."""

    def __init__(self, sentences: list[list[str]]) -> None:
        self.starts = [s[0] for s in sentences]
        self.next: dict[str, list[str]] = defaultdict(list)
        for s in sentences:
            for a, b in zip(s, [*s[1:], ""], strict=True):
                self.next[a].append(b)

    def sentence(self, rng: random.Random, most: int = 28) -> list[str]:
        words = [rng.choice(self.starts)]
        while len(words) < most:
            successor = rng.choice(self.next[words[-1]])
            if not successor:
                if len(words) >= 5:
                    break
                successor = rng.choice(self.starts)
            words.append(successor)
        return words


class Names:
    """Made-up names, Zipf-distributed over a pool (the rare terms)."""

    def __init__(self, rng: random.Random, size: int = 20_000) -> None:
        pool: set[str] = set()
        while len(pool) < size:
            pool.add("".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4))))
        self.pool = sorted(pool)
        rng.shuffle(self.pool)
        weights = [1 / (rank + 1) ** 1.05 for rank in range(size)]
        total = 0.0
        self.cumulative = []
        for w in weights:
            total += w
            self.cumulative.append(total)

    def draw(self, rng: random.Random, k: int = 1) -> list[str]:
        return rng.choices(self.pool, cum_weights=self.cumulative, k=k)


@dataclass
class CorpusModel:
    chains: list[Chain]  # one per collection
    names: Names
    vocabulary: list[str]  # every word the documents can contain, lower case


def corpus_model(collections: int, seed: int) -> CorpusModel:
    rng = random.Random(seed)
    per_source = [source_sentences(path) for path in SOURCES]
    chains = []
    for _ in range(collections):
        subset = rng.sample(range(len(per_source)), k=max(1, len(per_source) // 3))
        chains.append(Chain([s for i in subset for s in per_source[i]]))
    names = Names(rng)
    vocabulary = sorted({w.lower() for sentences in per_source for s in sentences for w in s} | set(names.pool))
    return CorpusModel(chains, names, vocabulary)


def prose(chain: Chain, names: Names, rng: random.Random, sentences: int) -> str:
    out = []
    for _ in range(sentences):
        words = chain.sentence(rng)
        if rng.random() < 0.35:
            words.insert(rng.randrange(1, len(words) + 1), names.draw(rng)[0].capitalize())
        out.append(" ".join(words) + ".")
    text = " ".join(out)
    return text[:1].upper() + text[1:]


def make_document(model: CorpusModel, collection: int, number: int, rng: random.Random) -> tuple[str, str]:
    """(file name, text) of one document: a title, 1 to ~60 sections of 1-4 paragraphs."""
    chain, names = model.chains[collection], model.names
    kind = ("md", "txt", "html")[number % 3]
    title = " ".join(chain.sentence(rng, most=rng.randint(3, 7))).capitalize()
    if rng.random() < 0.5:
        title = f"{names.draw(rng)[0].capitalize()}: {title}"
    sections = max(1, min(60, int(rng.lognormvariate(1.7, 0.9))))
    parts = []
    for _ in range(sections):
        heading = " ".join(chain.sentence(rng, most=rng.randint(2, 5))).capitalize()
        paragraphs = [prose(chain, names, rng, rng.randint(2, 7)) for _ in range(rng.randint(1, 4))]
        if kind == "md":
            parts.append(f"## {heading}\n\n" + "\n\n".join(paragraphs) + "\n")
        elif kind == "html":
            parts.append(f"<h2>{heading}</h2>\n" + "\n".join(f"<p>{p}</p>" for p in paragraphs) + "\n")
        else:
            parts.append(f"{heading}\n\n" + "\n\n".join(paragraphs) + "\n")
    body = "\n".join(parts)
    name = f"c{collection + 1:02d}-{number:05d}.{kind}"
    if kind == "md":
        return name, f"# {title}\n\n{body}"
    if kind == "html":
        return name, (
            f'<!doctype html>\n<html><head><meta charset="utf-8"><title>{title}</title></head>\n'
            f"<body><h1>{title}</h1>\n{body}</body></html>\n"
        )
    return name, f"{title}\n\n{body}"


def chunk_words(name: str, text: str) -> list[set[str]]:
    """The chunks the worker will make of this file (the package's own parser and chunker),
    each as the set of its words in lower case: the document's title, the section's heading
    path and the chunk's text, as its content_tsv holds them."""
    from ingestion_pipeline.processing import chunk_sections, heading_paths, parse

    parsed = parse(text.encode("utf-8"), name, max_bytes=50 * 1024 * 1024)
    headings = heading_paths(parsed.sections)
    return [
        {w.lower() for w in WORD.findall(f"{parsed.title or ''} {headings.get(c.section_ordinal) or ''} {c.text}")}
        for c in chunk_sections(parsed.sections)
    ]


def generate_folders(root: Path, model: CorpusModel, share: int, seed: int) -> list[tuple[int, int, int]]:
    """One folder per collection (c01, c02, …) of documents until it holds at least `share`
    chunks; (documents, chunks, bytes) per collection."""
    made = []
    for collection in range(len(model.chains)):
        rng = random.Random(f"{seed}:{collection}")
        folder = root / collection_name(collection)
        folder.mkdir(parents=True)
        documents = chunks = size = 0
        while chunks < share:
            name, text = make_document(model, collection, documents, rng)
            (folder / name).write_text(text, "utf-8")
            documents += 1
            chunks += len(chunk_words(name, text))
            size += len(text.encode("utf-8"))
        made.append((documents, chunks, size))
    return made


def collection_name(index: int) -> str:
    return f"c{index + 1:02d}"


# -- the build ------------------------------------------------------------------------

COUNTS_SQL = """
select d.collection, count(distinct d.id) as documents, count(*) as chunks
  from committed_document_chunks c
  join documents d on d.id = c.document_id
 where d.deleted_at is null
 group by d.collection
 order by d.collection
"""


def built(uri: str, args: argparse.Namespace, share: int) -> tuple[dict | None, str]:
    """The database's (documents, chunks) per collection when it holds a finished build of
    this corpus at the current schema, else None and why not."""
    from ingestion_pipeline.db.migrate import plan
    from ingestion_pipeline.errors import IngestError

    try:
        schema = plan(uri)
    except IngestError as exc:  # no such database, or a migration file changed since the build
        return None, str(exc).splitlines()[0].split(";")[0]
    if schema.pending or schema.ahead:
        return None, "its schema is not this checkout's"
    model = corpus_model(args.collections, args.seed)
    firsts = [make_document(model, i, 0, random.Random(f"{args.seed}:{i}")) for i in range(args.collections)]
    with connect(uri) as conn:
        counts = {r[0]: (r[1], r[2]) for r in conn.execute(COUNTS_SQL)}
        unfinished = conn.execute("select count(*) from ingestion_jobs where status <> 'completed'").fetchone()[0]
        same_text = conn.execute(  # each collection's first document: its name and size
            "select count(*) = %s from documents d join unnest(%s::text[], %s::bigint[]) as f (name, size)"
            " on d.source_name = f.name and d.byte_size = f.size",
            (len(firsts), [n for n, _ in firsts], [len(t.encode("utf-8")) for _, t in firsts]),
        ).fetchone()[0]
    if set(counts) != {collection_name(i) for i in range(args.collections)}:
        return None, f"it has collections {sorted(counts)}"
    if unfinished or any(chunks < share for _, chunks in counts.values()):
        return None, f"{unfinished} jobs unfinished, or a collection below {share} chunks"
    if not same_text:
        return None, "its documents are another corpus (seed or generator)"
    return counts, "already built"


def ingest(*args: str) -> list[str]:
    return [str(ROOT / ".venv" / "bin" / "ingest"), *args]


def build(server: str, uri: str, args: argparse.Namespace, share: int) -> None:
    """A fresh database, migrated, filled by `ingest enqueue` per collection and drained by
    --processes `ingest work --drain`."""
    from ingestion_pipeline.db.migrate import migrate

    with psycopg.connect(db_uri(server, "postgres"), autocommit=True) as conn:
        exists = conn.execute("select 1 from pg_database where datname = %s", (args.database,)).fetchone()
        if exists and not args.database.startswith("bench_"):
            raise SystemExit(f"refusing to drop database {args.database}: the bench drops only databases named bench_…")
        conn.execute(f'drop database if exists "{args.database}" with (force)')
        conn.execute(f'create database "{args.database}"')
    migrate(uri)
    folder = Path(tempfile.mkdtemp(prefix="ingest-bench-search-"))
    try:
        began = time.perf_counter()
        model = corpus_model(args.collections, args.seed)
        made = generate_folders(folder, model, share, args.seed)
        documents, chunks, size = (sum(m[i] for m in made) for i in range(3))
        print(
            f"corpus: {documents} documents, {chunks} chunks (the package's chunker), {size / 1e6:.1f} MB in "
            f"{args.collections} folders, generated in {time.perf_counter() - began:.1f}s",
            flush=True,
        )
        env = {**os.environ, "DATABASE_URL": uri}
        began = time.perf_counter()
        for index in range(args.collections):
            name = collection_name(index)
            subprocess.run(
                ingest("enqueue", str(folder / name), "--collection", name, "--batch", f"bench-search {name}"),
                env=env,
                check=True,
                capture_output=True,
            )
        enqueued = time.perf_counter() - began
        print(f"ingest enqueue: {args.collections} folders in {enqueued:.1f}s", flush=True)
        began = time.perf_counter()
        workers = [
            subprocess.Popen(ingest("work", "--drain", "--json"), env=env, stdout=subprocess.PIPE, text=True)
            for _ in range(args.processes)
        ]
        reports = []
        for worker in workers:
            out, _ = worker.communicate()
            if worker.returncode:
                raise SystemExit(f"ingest work exited with {worker.returncode}")
            reports.append(json.loads(out))
        completed = sum(r["completed"] for r in reports)
        failed = sum(r["failed"] for r in reports)
        print(
            f"ingest work --drain x {args.processes}: {completed} completed, {failed} failed in "
            f"{time.perf_counter() - began:.1f}s",
            flush=True,
        )
    finally:
        shutil.rmtree(folder, ignore_errors=True)
