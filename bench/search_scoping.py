"""The cost of tenant scoping in search (issue 33): a member's search under row-level
security against the owner's search of the same collection.

The database: at least --chunks committed chunks (default 100,000) in --collections
collections (default 20, an equal share each), indexed by the real path: one folder per
collection, `ingest enqueue FOLDER --collection NAME`, then --processes `ingest work
--drain` at once. The text is generated and deterministic (--seed): each collection's
documents come from a word-bigram model of its own random third of the relevance test's
pages (tests/fixtures/relevance/pages, read as data), so collections differ in vocabulary,
with made-up names (a Zipf-distributed pool of 20,000) sprinkled in as the rarest terms;
Markdown, plain text and HTML, with titles and section headings, 1 to ~100 chunks a
document. A database that already holds this build at this checkout's schema (the
migration ledger matches the files; every collection at its share of committed chunks;
nothing queued or failed; the same corpus) is reused; --rebuild builds it anew.

One user (a fixed uuid) is made a reader of exactly one collection X (--collection,
default c07) with grant_collection; no collection is public. After VACUUM ANALYZE, ~50
queries of varied selectivity (one word: rare, uncommon, medium, common, by the share of
X's chunks it is in, counted on the generated text so that every server gets the same
queries; two and three words; questions; "phrases"; -exclusions; words absent from X) are
searched in lexical mode, --warmup untimed rounds then --rounds timed ones, the variants
interleaved (query by query, in each of their six orders in turn):

  owner        select * from search_documents(q, array['X'], 'lexical', 10) as the
               connection's own role (a superuser: row-level security does not apply)
  member       the same with p_collections null, in a transaction that first does what
               PostgREST does: set local role authenticated; set_config('request.jwt.claims',
               '{"sub": "<uuid>", "role": "authenticated"}', true)
  member, {X}  the member with p_collections = array['X']

Timed: the search statement at the client (execute and fetch), each in its own
transaction. Every member search must return the owner's document ids in the owner's
order, every round, and a user who is a member of nothing must get no rows; otherwise the
script exits 1. The bar: member p95 at most 1.2x owner p95. --explain [QUERY] then prints
the plans (EXPLAIN ANALYZE, by auto_explain) of the statements inside the RPC for one
query, as owner and as member.

Server: the package's embedded PostgreSQL (its own folder, --data-dir, kept between runs
so that the build is reused; the server is stopped at the end), or --database-url (a
superuser: it creates the database, sets role authenticated and loads auto_explain). The
database (--database, default bench_search) is kept.
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import itertools
import json
import math
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
from common import ROOT, command_line, db_uri, embedded_server, machine_line, percentile, print_table

from ingestion_pipeline.db.migrate import default_migrations_dir, discover

DATABASE = "bench_search"
USER_ID = uuid.UUID("3f1c0b7e-33a1-4c2e-9d6b-5e0b2a7c9d11")  # the member of X
STRANGER_ID = uuid.UUID("8d2e4f60-33b2-4a7d-8c1e-0f9a6b3d2c44")  # a member of nothing
# The prose the corpus is made from: the relevance test's pages (fixtures: they change only
# with that test, so a build is the same text on every server and at every commit).
SOURCES = sorted((ROOT / "tests" / "fixtures" / "relevance" / "pages").glob("*.html"))
BAR = 1.2


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


# -- the queries ----------------------------------------------------------------------


@dataclass
class Query:
    kind: str
    text: str
    in_x: int = 0  # chunks of X that match any of its terms
    everywhere: int = 0  # chunks of every collection that do


# The words PostgreSQL's `english` configuration does not drop (its stop words are the
# same in every version; its stems are not: Snowball changed in PostgreSQL 16 and 17).
NOT_STOP_WORDS_SQL = """
select w from unnest(%s::text[]) as w where numnode(websearch_to_tsquery('english', w)) > 0
"""

COVERAGE_SQL = """
select count(*) filter (where d.collection = %(collection)s) as in_x, count(*) as everywhere
  from committed_document_chunks c
  join documents d on d.id = c.document_id
 where c.content_tsv @@ websearch_to_tsquery('english', %(any)s)
   and (%(excluded)s = '' or not c.content_tsv @@ websearch_to_tsquery('english', %(excluded)s))
"""


def terms(text: str) -> tuple[str, str]:
    """The query's included and excluded terms, each joined with `or` (as the RPC matches
    candidates: any included term, no excluded one)."""
    tokens = re.findall(r'(-?)("[^"]*"|\S+)', text)
    included = " or ".join(t for minus, t in tokens if not minus)
    excluded = " or ".join(t for minus, t in tokens if minus)
    return included, excluded


def word_counts(model: CorpusModel, x: int, share: int, seed: int) -> tuple[Counter[str], int]:
    """In how many of collection x's chunks each word is, from its generated documents (the
    build's own, regenerated): the same on every server, whatever its stemmer."""
    rng = random.Random(f"{seed}:{x}")
    counts: Counter[str] = Counter()
    chunks = number = 0
    while chunks < share:
        name, text = make_document(model, x, number, rng)
        for words in chunk_words(name, text):
            counts.update(words)
            chunks += 1
        number += 1
    return counts, chunks


def pick_queries(conn: psycopg.Connection, model: CorpusModel, x: str, share: int, seed: int) -> list[Query]:
    """~50 queries, the same for the same corpus on every server: words by the share of X's
    chunks they are in, counted on the generated text (words with an inflected form in the
    vocabulary left out, so that a word's count is its stem's); then the chunks their terms
    match, counted by the server."""
    rng = random.Random(f"{seed}:queries")
    index = int(x[1:]) - 1
    chain = model.chains[index]
    counts, chunks_x = word_counts(model, index, share, seed)
    words = sorted(w for w in model.vocabulary if len(w) >= 4 and w.isalpha() and w.isascii())
    candidates = {r[0] for r in conn.execute(NOT_STOP_WORDS_SQL, ([w for w in words if not inflected(w, words)],))}
    bands: dict[str, list[str]] = defaultdict(list)
    for word in sorted(candidates):
        if counts[word]:
            bands[band(counts[word], chunks_x)].append(word)

    def one(kind: str) -> str:
        return rng.choice(bands[kind])

    def phrase() -> str:
        while True:
            sentence = [w.lower() for w in chain.sentence(rng)]
            pairs = [p for p in itertools.pairwise(sentence) if all(w.isalpha() and len(w) >= 4 for w in p)]
            if pairs:
                return '"{} {}"'.format(*rng.choice(pairs))

    queries: list[Query] = []
    for kind, k in (("rare", 8), ("uncommon", 8), ("medium", 8), ("common", 6)):
        queries += [Query(f"one word, {kind}", w) for w in rng.sample(bands[kind], k=min(k, len(bands[kind])))]
    queries += [Query("two words", f"{one('medium')} {one('uncommon')}") for _ in range(5)]
    queries += [Query("three words", f"{one('common')} {one('medium')} {one('rare')}") for _ in range(4)]
    queries += [Query("question (6-9 words)", " ".join(chain.sentence(rng, most=rng.randint(6, 9)))) for _ in range(3)]
    queries += [Query("phrase", phrase()) for _ in range(3)]
    queries += [Query("exclusion", f"{one('common')} -{one('medium')}") for _ in range(2)]
    absent = [n for n in model.names.pool if n in candidates and not counts[n]]
    for name in absent[:200]:  # names the other collections have
        if len([q for q in queries if q.kind == "absent from X"]) == 3:
            break
        if coverage(conn, x, name)[1]:
            queries.append(Query("absent from X", name))
    for q in queries:
        q.in_x, q.everywhere = coverage(conn, x, q.text)
    return queries


def inflected(word: str, ordered: list[str]) -> bool:
    """Another word of the sorted vocabulary starts with all of this one but its last three
    letters (and at least three): "size", "sizes", "sizing"."""
    stem = word[: max(3, len(word) - 3)]
    at = bisect.bisect_left(ordered, stem)
    return sum(1 for w in ordered[at : at + 2] if w.startswith(stem)) > 1


def band(chunks: int, of: int) -> str:
    return "rare" if chunks <= 10 else "uncommon" if chunks < 0.02 * of else "medium" if chunks < 0.2 * of else "common"


def coverage(conn: psycopg.Connection, x: str, text: str) -> tuple[int, int]:
    """The chunks (in X, in every collection) that match any of the query's terms and none of
    its excluded ones."""
    included, excluded = terms(text)
    row = conn.execute(COVERAGE_SQL, {"collection": x, "any": included, "excluded": excluded}).fetchone()
    return row[0], row[1]


# -- the searches ---------------------------------------------------------------------

SEARCH_SQL = "select * from search_documents(%s, %s, 'lexical', %s)"  # document_id first


@dataclass
class Variant:
    label: str
    member: uuid.UUID | None  # None: the connection's own role
    scoped_to_x: bool
    seconds: list[float] = field(default_factory=list)
    by_kind: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))


def claims(user: uuid.UUID) -> str:
    return json.dumps({"sub": str(user), "role": "authenticated"})


def search(
    conn: psycopg.Connection, text: str, collections: list[str] | None, limit: int, member: uuid.UUID | None
) -> tuple[float, list[uuid.UUID]]:
    """One search in its own transaction, as PostgREST runs a request; the statement's time."""
    with conn.transaction():
        if member is not None:
            conn.execute("set local role authenticated")
            conn.execute("select set_config('request.jwt.claims', %s, true)", (claims(member),))
        began = time.perf_counter()
        rows = conn.execute(SEARCH_SQL, (text, collections, limit)).fetchall()
        seconds = time.perf_counter() - began
    return seconds, [r[0] for r in rows]


def measure(uri: str, queries: list[Query], x: str, rounds: int, warmup: int, limit: int) -> tuple[list[Variant], int]:
    """Every query in every variant, `warmup` untimed rounds then `rounds` timed ones; the
    variants in each of their six orders in turn. Exits if a member's results differ from the
    owner's (every round) or a member of nothing gets a row."""
    variants = [
        Variant(f"owner, p_collections {{{x}}}", None, True),
        Variant("member (RLS), p_collections null", USER_ID, False),
        Variant(f"member (RLS), p_collections {{{x}}}", USER_ID, True),
    ]
    # Each variant after each other one equally often (a rotation would keep one order: on
    # PostgreSQL 18 a member's search right after the owner's is the slower one).
    orders = list(itertools.permutations(variants))
    mismatches = []
    hits = 0
    began = time.perf_counter()
    with connect(uri) as conn:
        for round_ in range(warmup + rounds):
            for i, q in enumerate(queries):
                results = {}
                for v in orders[(round_ * len(queries) + i) % len(orders)]:
                    seconds, ids = search(conn, q.text, [x] if v.scoped_to_x else None, limit, v.member)
                    results[v.label] = ids
                    if round_ >= warmup:
                        v.seconds.append(seconds)
                        v.by_kind[q.kind].append(seconds)
                owner = results[variants[0].label]
                hits += len(owner) if round_ == 0 else 0
                for v in variants[1:]:
                    if results[v.label] != owner:
                        mismatches.append((round_, q.text, v.label, owner, results[v.label]))
            kind = "warm-up" if round_ < warmup else "timed"
            print(f"  round {round_ + 1} ({kind}) done at {time.perf_counter() - began:.0f}s", file=sys.stderr)
        for q in queries:
            _, ids = search(conn, q.text, None, limit, STRANGER_ID)
            if ids:
                mismatches.append(("-", q.text, "a member of nothing", [], ids))
    if mismatches:
        for m in mismatches[:10]:
            print(f"MISMATCH round {m[0]} query {m[1]!r}, {m[2]}: owner {m[3]} vs {m[4]}", file=sys.stderr)
        raise SystemExit(f"FAIL: {len(mismatches)} searches returned other rows than the owner's (or any row)")
    return variants, hits


# -- where the time goes --------------------------------------------------------------


def costliest(queries: list[Query], variants: list[Variant]) -> str:
    """The query whose member p50 exceeds the owner's by the most milliseconds."""
    owner, member = variants[0], variants[1]

    def extra(i: int) -> float:
        return percentile(member.seconds[i :: len(queries)], 50) - percentile(owner.seconds[i :: len(queries)], 50)

    return queries[max(range(len(queries)), key=extra)].text


# The two statements that do the work: search_lexical_hits' body, the RPC's final join.
PLAN_MARKS = {"chunks as (": "search_lexical_hits", "with lists as": "search_documents (return query)"}
# At level warning: the search functions run with client_min_messages = warning, which would
# keep a LOG from this client.
AUTO_EXPLAIN = (
    "log_min_duration = 0",
    "log_analyze = on",
    "log_buffers = on",
    "log_nested_statements = on",
    "log_level = warning",
)


def explain(uri: str, text: str, x: str, limit: int) -> None:
    """The plans of the statements inside the RPC (auto_explain, nested statements, sent to
    this client as warnings) for one query, as owner and as member. Needs a superuser (LOAD)."""
    for label, member, collections in (("owner", None, [x]), ("member (RLS)", USER_ID, None)):
        plans: list[str] = []
        with connect(uri) as conn:
            conn.add_notice_handler(lambda diag, plans=plans: plans.append(diag.message_primary or ""))
            conn.execute("load 'auto_explain'")
            for setting in AUTO_EXPLAIN:
                conn.execute(f"set auto_explain.{setting}")
            search(conn, text, collections, limit, member)
        for plan in plans:
            statement = next((name for mark, name in PLAN_MARKS.items() if mark in plan), None)
            if statement:
                print(f"\n### {label}, {text!r}: {statement}\n")
                print(without_query_text(plan))


def without_query_text(plan: str) -> str:
    """auto_explain's message without the statement's text (the plan and its parameters)."""
    lines = plan.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Query Text:"))
    end = next(i for i, line in enumerate(lines) if i > start and re.match(r"(Query Parameters|\S.*\(cost=)", line))
    return "\n".join([*lines[:start], *lines[end:]])


# -- main -----------------------------------------------------------------------------


def connect(uri: str) -> psycopg.Connection:
    """Autocommit, no prepared statements (as the package connects)."""
    return psycopg.connect(uri, autocommit=True, prepare_threshold=None)


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f}"


def prepare(uri: str, args: argparse.Namespace, counts: dict) -> list[Query]:
    """The member's grant (X only, nothing public), fresh statistics, and the queries."""
    with connect(uri) as conn:
        conn.execute("update collections set is_public = false where is_public")
        conn.execute("delete from collection_members where user_id in (%s, %s)", (USER_ID, STRANGER_ID))
        granted = conn.execute("select grant_collection(%s, %s, 'reader')", (args.collection, USER_ID)).fetchone()
        if not granted[0]["ok"]:
            raise SystemExit(f"grant_collection refused: {granted[0]}")
        for table in ("documents", "document_sections", "document_chunks", "index_generations", "collections"):
            conn.execute(f"vacuum (analyze) {table}")
        conn.execute("analyze collection_members")
        model = corpus_model(args.collections, args.seed)
        queries = pick_queries(conn, model, args.collection, math.ceil(args.chunks / args.collections), args.seed)
        role, superuser = conn.execute(
            "select current_user, (select rolsuper from pg_roles where rolname = current_user)"
        ).fetchone()
        members = conn.execute("select collection from collection_members where user_id = %s", (USER_ID,)).fetchall()
    assert members == [(args.collection,)], members
    print(f"owner: role {role} (superuser: {superuser}); member: user {USER_ID}, reader of {members[0][0]} only")
    return queries


def report(queries: list[Query], variants: list[Variant], args: argparse.Namespace, chunks: int, hits: int) -> None:
    x = args.collection
    print(
        f"\nresults identical: every member search returned the owner's document ids in the owner's order "
        f"({len(queries)} queries x {args.warmup + args.rounds} rounds x 2 member variants; {hits} hits a round); "
        "a member of nothing got no rows"
    )
    owner_p95 = percentile(variants[0].seconds, 95)
    print_table(
        f"lexical search, {len(queries)} queries x {args.rounds} rounds, limit {args.limit}, {chunks} chunks in "
        f"{args.collections} collections; X = {x} (ms, the search statement at the client)",
        ["variant", "searches", "p50", "p95", "mean", "max", "p95 / owner p95"],
        [
            [
                v.label,
                len(v.seconds),
                ms(percentile(v.seconds, 50)),
                ms(percentile(v.seconds, 95)),
                ms(sum(v.seconds) / len(v.seconds)),
                ms(max(v.seconds)),
                f"{percentile(v.seconds, 95) / owner_p95:.2f}",
            ]
            for v in variants
        ],
    )
    kinds = list(dict.fromkeys(q.kind for q in queries))
    print_table(
        "p50 by kind of query (ms)",
        ["kind", "queries", "owner", "member", f"member, {{{x}}}", "member / owner"],
        [
            [
                kind,
                sum(1 for q in queries if q.kind == kind),
                *[ms(percentile(v.by_kind[kind], 50)) for v in variants],
                f"{percentile(variants[1].by_kind[kind], 50) / percentile(variants[0].by_kind[kind], 50):.2f}",
            ]
            for kind in kinds
        ],
    )
    ratio = percentile(variants[1].seconds, 95) / owner_p95
    print(f"\nmember p95 / owner p95 = {ratio:.2f} (bar: at most {BAR}): {'met' if ratio <= BAR else 'NOT met'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--database-url",
        help="a server to use, as a superuser (its database name is not used: see --database; default: the "
        "embedded server under --data-dir)",
    )
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=Path(tempfile.gettempdir()) / "ingest-bench-search-latency",
        help="the embedded server's folder, kept between runs (default: %(default)s)",
    )
    parser.add_argument(
        "--database",
        default=DATABASE,
        help="the bench's database, kept (default %(default)s; rebuilt only if named bench_…)",
    )
    parser.add_argument("--chunks", type=int, default=100_000, help="committed chunks at least (default 100000)")
    parser.add_argument("--collections", type=int, default=20, help="collections (default 20)")
    parser.add_argument("--collection", default="c07", help="the member's collection X (default c07)")
    parser.add_argument("--rounds", type=int, default=5, help="timed rounds over the queries (default 5)")
    parser.add_argument("--warmup", type=int, default=1, help="untimed rounds first (default 1)")
    parser.add_argument("--limit", type=int, default=10, help="hits per search (default 10)")
    parser.add_argument(
        "--max-matches",
        type=int,
        help="only the queries whose terms match at most this many chunks in all collections (default: every query)",
    )
    parser.add_argument("--processes", type=int, default=2, help="`ingest work --drain` processes (default 2)")
    parser.add_argument("--seed", type=int, default=33, help="corpus and query seed (default 33)")
    parser.add_argument("--rebuild", action="store_true", help="drop and build the database even if it is built")
    parser.add_argument("--build-only", action="store_true", help="build (or check) the database, then stop")
    parser.add_argument(
        "--explain",
        nargs="?",
        const="",
        metavar="QUERY",
        help="then print the plans of the RPC's statements for QUERY, as owner and as member (no QUERY: the one "
        "whose member p50 exceeds the owner's the most)",
    )
    args = parser.parse_args()
    share = math.ceil(args.chunks / args.collections)

    server_cm = (
        contextlib.nullcontext(args.database_url) if args.database_url else embedded_server(data_dir=args.data_dir)
    )
    with server_cm as server:
        uri = db_uri(server, args.database)
        print(f"$ {command_line()}")
        print(machine_line(server))
        newest = discover(default_migrations_dir())[-1]
        print(f"schema: migration {newest.version}_{newest.name} (sha256 {newest.checksum[:12]}…)")
        began = time.perf_counter()
        counts, why = (None, "--rebuild") if args.rebuild else built(uri, args, share)
        if counts is None:
            print(f"building database {args.database} ({why})", flush=True)
            build(server, uri, args, share)
            counts, why = built(uri, args, share)
            if counts is None:
                raise SystemExit(f"FAIL: the build is not what it should be: {why}")
            print(f"built in {time.perf_counter() - began:.1f}s")
        else:
            print(f"reusing database {args.database}: {why}")
        if args.collection not in counts:
            raise SystemExit(f"no collection {args.collection}")
        documents, chunks = (sum(c[i] for c in counts.values()) for i in range(2))
        sizes = [c[1] for c in counts.values()]
        print(
            f"{chunks} committed chunks of {documents} documents in {len(counts)} collections ({min(sizes)}-"
            f"{max(sizes)} chunks each); X = {args.collection}: {counts[args.collection][0]} documents, "
            f"{counts[args.collection][1]} chunks"
        )
        if args.build_only:
            return

        queries = prepare(uri, args, counts)
        print_table(
            f"{len(queries)} queries (chunks their terms match: in {args.collection} / in every collection)",
            ["kind", "query", f"in {args.collection}", "everywhere"],
            [[q.kind, q.text, q.in_x, q.everywhere] for q in queries],
        )
        if args.max_matches is not None:
            queries = [q for q in queries if q.everywhere <= args.max_matches]
            print(f"\n--max-matches {args.max_matches}: {len(queries)} of these queries are searched")
        variants, hits = measure(uri, queries, args.collection, args.rounds, args.warmup, args.limit)
        report(queries, variants, args, chunks, hits)
        if args.explain is not None:
            explain(uri, args.explain or costliest(queries, variants), args.collection, args.limit)


if __name__ == "__main__":
    main()
