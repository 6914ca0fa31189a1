"""What one anonymous search can cost under the query caps (issue 58's acceptance: no query
admitted to an anonymous search costs more than 2x the costliest query of 64 plain words).

The caps (migrations 20261204000100 and 20261206000600_query_lexeme_cap.sql): at most 4,096
characters, 64 distinct terms and 64 words once identifiers are split (`a.b`, `a_b`, `a::b`,
`a->b` count as the whole and each part): outside phrases the distinct lexemes, inside a
"phrase" every word position, repeats included.

The database: the PostgreSQL 15 manual (bench/corpora.py; every HTML page) indexed by
`ingest enqueue` and `ingest work --drain --embedder hash` (hybrid then has vectors to score),
--copies more copies of it in the same collection (bench/search_latency.py's copy), the
term counts compacted and VACUUM ANALYZE, the collection made public.

Queries, built from the corpus's words (lexemes that are whole words, by the number of
documents they are in):
  baseline   64 plain words: the 64 most common; 64 drawn from the 1,000 most common;
             64 drawn from all (--draws of each); the costliest is the bar's reference
  admitted   what the cap lets through at its edge, made of the most common words (the
             largest posting lists): a dotted and a snake_case identifier of as many parts
             as it admits, a phrase of 64 words, hyphenated pairs, quoted pairs,
             exclusions, identifiers and phrases mixed, a question, one word or one phrase
             repeated to 4,096 characters, a phrase of one word or two in turn as long
             as the cap admits
  refused    an identifier of 64 parts, 32 hyphenated pairs, the fifth review's dotted
             identifier of 4,078 characters (446 lexemes), and phrases longer than 64 words
             (one word repeated 65 and 256 times and to 4,096 characters; 2, 3 and 64 words
             in turn to 4,096 characters)

Each is searched as the anonymous reader (in one transaction: set_config('role', 'anon')
and the claims, as PostgREST does) with search_documents(q, null, mode, 10[, vector,
'hash']), lexical and hybrid, one untimed run then --runs timed ones (default 3); a query's
cost is the minimum, timed at the client. Printed per query: its distinct lexemes, its
words as the cap counts them, characters, ms per mode and the ratio to the costliest baseline query of that mode (the
bar: <= 2), and the rows one lexical search reads (pg_stat_xact_user_tables).
"""

from __future__ import annotations

import argparse
import json
import random
import time

import corpora
import psycopg
from common import command_line, connect, create_database, embedded_server, machine_line, print_table
from search_latency import copy_rows, settle, sizes
from search_quality import index_pages

from ingestion_pipeline.processing.embedding import HashEmbedder

SEARCH_SQL = "select document_id from search_documents(%s, null, %s, 10, %s::real[], %s)"
READS_SQL = (
    "select coalesce(sum(seq_tup_read + idx_tup_fetch + seq_scan), 0)::bigint as n from pg_stat_xact_user_tables"
)
LEXEMES_SQL = """
select count(distinct w.lexeme) as n
  from search_query_terms(%s) t
 cross join lateral unnest(tsvector_to_array(to_tsvector('english',
       search_identifier_text(btrim(t.term, '"'))))) as w (lexeme)
"""
WORDS_SQL = """
select (select count(distinct l.lexeme)
          from search_query_terms(%(q)s) t
         cross join lateral unnest(tsvector_to_array(to_tsvector('english',
               search_identifier_text(t.term)))) as l (lexeme)
         where t.term not like '"%%')
     + (select coalesce(sum((numnode(websearch_to_tsquery('english',
               search_identifier_text(btrim(t.term, '"')))) + 1) / 2), 0)
          from search_query_terms(%(q)s) t
         where t.term like '"%%') as n
"""  # the cap's count (migration 20261206000600's search_query_refusal)
EMBEDDER = HashEmbedder()
MODES = ("lexical", "hybrid")


def words_by_frequency(conn: psycopg.Connection) -> list[str]:
    """Every whole-word lexeme of the corpus, most documents first."""
    return [
        row["lexeme"]
        for row in conn.execute(
            """select lexeme from search_term_counts
                where lexeme ~ '^[a-z]{3,}$' and tsvector_to_array(to_tsvector('english', lexeme)) = array[lexeme]
                group by lexeme order by sum(documents) desc, lexeme"""
        )
    ]


def admitted(conn: psycopg.Connection, text: str) -> bool:
    return conn.execute("select search_query_refusal(%s) is null as ok", (text,)).fetchone()["ok"]


def largest(conn: psycopg.Connection, build, most: int = 64) -> str:
    """build(n) for the largest n <= most that the cap admits."""
    for n in range(most, 0, -1):
        if admitted(conn, text := build(n)):
            return text
    raise SystemExit("no query of this shape is admitted")


def to_length(unit: str, length: int = 4096) -> str:
    """`unit` repeated, whole, as often as fits in `length` characters."""
    return (unit * (length // len(unit))).rstrip(" .-_")


def pick_queries(conn: psycopg.Connection, words: list[str], draws: int, seed: int) -> list[tuple[str, str, str]]:
    """(group, label, text)"""
    rng = random.Random(seed)
    top = words[:64]
    queries = [("baseline", "64 most common words", " ".join(top))]
    for n in range(draws):
        queries.append(
            ("baseline", f"64 of the 1,000 most common, draw {n + 1}", " ".join(rng.sample(words[:1000], 64)))
        )
    for n in range(draws):
        queries.append(("baseline", f"64 of all {len(words):,} words, draw {n + 1}", " ".join(rng.sample(words, 64))))

    def pairs(sep: str, n: int) -> str:
        return " ".join(f"{top[2 * i]}{sep}{top[2 * i + 1]}" for i in range(n))

    def filled(prefix: str) -> str:  # the prefix, then the next common words up to the cap
        return largest(conn, lambda n: f"{prefix} {' '.join(words[64 : 64 + n])}".strip())

    ident = largest(conn, lambda n: ".".join(top[:n]))
    ident20 = ".".join(top[20:40])
    queries += [
        ("admitted", f"dotted identifier, {ident.count('.') + 1} parts (the most admitted)", ident),
        ("admitted", "snake_case identifier, the most parts admitted", largest(conn, lambda n: "_".join(top[:n]))),
        ("admitted", "phrase of the 64 most common words", f'"{" ".join(top)}"'),
        ("admitted", "hyphenated pairs, the most admitted", largest(conn, lambda n: pairs("-", n), 32)),
        ("admitted", "hyphenated pairs + words to the cap", filled(pairs("-", 16))),
        ("admitted", "32 quoted two-word phrases", " ".join(f'"{top[2 * i]} {top[2 * i + 1]}"' for i in range(32))),
        ("admitted", "32 words, 32 exclusions", " ".join(top[:32] + [f"-{w}" for w in top[32:64]])),
        ("admitted", "dotted identifiers of 7 parts, the most admitted", largest(
            conn, lambda n: " ".join(".".join(top[7 * i : 7 * i + 7]) for i in range(n)), 9)),
        ("admitted", "phrase of 20, identifier of 20 parts, words", filled(f'"{" ".join(top[:20])}" ' + ident20)),
        ("admitted", "question: how do i + common words", largest(conn, lambda n: "how do i " + " ".join(top[:n]))),
        ("admitted", "the most common word to 4,096 characters", to_length(top[0] + " ")),
        ("admitted", "a phrase of it 64 times", f'"{" ".join([top[0]] * 64)}"'),
        ("admitted", "a phrase of it, the most words admitted", largest(
            conn, lambda n: f'"{" ".join([top[0]] * n)}"', 256)),
        ("admitted", "a phrase of 2 words in turn, the most admitted", largest(
            conn, lambda n: f'"{" ".join((top[0], top[1]) * n)}"', 128)),
        ("admitted", "its dotted identifier, 4,096 characters", to_length(top[0] + ".")),
        ("refused", "a phrase of it 65 times", f'"{" ".join([top[0]] * 65)}"'),
        ("refused", "a phrase of it 256 times", f'"{" ".join([top[0]] * 256)}"'),
        ("refused", "a phrase of it to 4,096 characters", f'"{to_length(top[0] + " ", 4094)}"'),
        ("refused", "a phrase of 2 words in turn, 4,096 characters", f'"{to_length(f"{top[0]} {top[1]} ", 4094)}"'),
        ("refused", "a phrase of 3 words in turn, 4,096 characters", f'"{to_length(" ".join(top[:3]) + " ", 4094)}"'),
        ("refused", "the 64 words' phrase over and over, 4,096 chars", f'"{to_length(" ".join(top) + " ", 4094)}"'),
        ("refused", "dotted identifier of the 64 most common words", ".".join(top)),
        ("refused", "32 hyphenated pairs (64 words)", pairs("-", 32)),
        ("refused", "the review's: dotted, 4,078 characters", ".".join(words[:1000])[:4078].rstrip(".")),
    ]  # fmt: skip
    return queries


def search(conn: psycopg.Connection, text: str, mode: str) -> tuple[float, int]:
    """One anonymous search in its own transaction: seconds, rows read. Raises on refusal."""
    vector = EMBEDDER.embed([text])[0] if mode != "lexical" else None
    with conn.transaction():
        before = conn.execute(READS_SQL).fetchone()["n"]
        conn.execute("select set_config('role', 'anon', true)")
        conn.execute("select set_config('request.jwt.claims', %s, true)", (json.dumps({"role": "anon"}),))
        began = time.perf_counter()
        conn.execute(SEARCH_SQL, (text, mode, vector, "hash" if vector else None)).fetchall()
        seconds = time.perf_counter() - began
        conn.execute("reset role")
        read = conn.execute(READS_SQL).fetchone()["n"] - before
    return seconds, read


def measure(conn: psycopg.Connection, queries: list[tuple[str, str, str]], runs: int) -> list[dict]:
    """One untimed round, then `runs` rounds over every query and mode (a query's runs spread
    over the whole measurement: the machine is shared); each query's minimum."""
    results = []
    for group, label, text in queries:
        row = {"group": group, "label": label, "text": text, "chars": len(text), "seconds": {}}
        row["lexemes"] = conn.execute(LEXEMES_SQL, (text,)).fetchone()["n"]
        row["words"] = conn.execute(WORDS_SQL, {"q": text}).fetchone()["n"]
        for mode in MODES:
            try:
                row[f"{mode} read"] = search(conn, text, mode)[1]
                row["seconds"][mode] = []
            except psycopg.errors.InvalidParameterValue as exc:
                row[mode], row["refusal"] = None, exc.diag.message_primary
        if (group == "refused") != ("refusal" in row):
            raise SystemExit(f"{label!r}: expected {group}, got {row.get('refusal') or 'admitted'}")
        results.append(row)
    for run in range(runs):
        for n, row in enumerate(results):
            for mode in MODES[:: 1 if (n + run) % 2 else -1]:
                if mode in row["seconds"]:
                    row["seconds"][mode].append(search(conn, row["text"], mode)[0])
    for row in results:
        row.update({mode: min(seconds) for mode, seconds in row["seconds"].items()})
    return results


def report(results: list[dict]) -> None:
    worst = {m: max(r[m] for r in results if r["group"] == "baseline") for m in MODES}
    table = []
    for r in results:
        cells = [r["group"], r["label"], r["lexemes"], r["words"], f"{r['chars']:,}"]
        for mode in MODES:
            cells += ["refused", "-"] if r[mode] is None else [f"{r[mode] * 1000:.1f}", f"{r[mode] / worst[mode]:.2f}"]
        cells.append("-" if r["lexical"] is None else f"{r['lexical read']:,}")
        table.append(cells)
    print_table(
        "anonymous search, min of the runs; ratio to the costliest 64-plain-word query of the mode",
        [
            "group",
            "query",
            "lexemes",
            "words",
            "chars",
            "lexical ms",
            "ratio",
            "hybrid ms",
            "ratio",
            "rows read (lexical)",
        ],
        table,
    )
    for mode in MODES:
        admitted_ = [r for r in results if r["group"] == "admitted"]
        top = max(admitted_, key=lambda r: r[mode])
        print(
            f"{mode}: costliest baseline {worst[mode] * 1000:.1f} ms; costliest admitted {top[mode] * 1000:.1f} ms "
            f"({top['label']}): {top[mode] / worst[mode]:.2f}x (bar: 2x)"
        )
    for r in results:
        if r["group"] == "refused":
            print(f"refused: {r['label']}: {r['refusal']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--copies", type=int, default=0, help="more copies of the manual (default 0: 1x)")
    parser.add_argument("--draws", type=int, default=3, help="random 64-word queries of each kind")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seed", type=int, default=58)
    parser.add_argument("--show", action="store_true", help="print each query's text")
    args = parser.parse_args()

    corpus = corpora.load("postgres")
    with embedded_server() as server:
        print(machine_line(server))
        print(f"$ {command_line()}")
        uri = create_database(server, "bench_query_cost", migrate=True)
        began = time.monotonic()
        index_pages(uri, corpus.files, "--embedder", "hash", batch=corpus.name)
        with connect(uri) as conn:
            if args.copies:
                copy_rows(conn, args.copies)
            settle(conn)
            print(f"built in {time.monotonic() - began:.0f} s: {sizes(conn)}")
            [collection] = [r["collection"] for r in conn.execute("select distinct collection from documents")]
            conn.execute("select add_collection(%s, true)", (collection,))
            words = words_by_frequency(conn)
            queries = pick_queries(conn, words, args.draws, args.seed)
            if args.show:
                for group, label, text in queries:
                    print(f"{group} | {label} | {text[:300]}")
            results = measure(conn, queries, args.runs)
    report(results)


if __name__ == "__main__":
    main()
