"""`cleanup.py --mode scale`: seeding databases of many live documents and the same abandoned
work (set-based, triggers off for the seeding transaction only; --mode zero seeds with it
too), then cleanup passes alternating between them, with the plans of some passes."""

from __future__ import annotations

import time

from cleanup_plans import TABLES_READ, explain_passes, plan_reads, statement_label
from common import (
    clone_database,
    connect,
    create_database,
    embedded_server,
    machine_line,
    ms,
    percentile,
    print_table,
    schema_version,
)

# -- --mode scale ---------------------------------------------------------------------------

# Live documents (indexed: one committed generation with its chunks, one completed job),
# then the abandoned work (the last --abandoned documents also get an abandoned generation).
# Foreign keys and the artifact fence are triggers: session_replication_role = replica turns
# them off for this transaction only, so documents and generations (which reference each
# other) go in with one insert each.
SCALE_SEED_SQL = [
    "set local session_replication_role = replica",
    # One import batch per --per-batch documents (scale: one batch for all), finished a day or
    # more ago (a minute apart), its counters those of its jobs; every row of a batch's
    # documents carries the batch's time.
    """create temporary table seed_docs on commit drop as
       select g, gen_random_uuid() as document_id, gen_random_uuid() as generation_id,
              g > %(live)s as abandoned, (g - 1) / %(per_batch)s as batch
         from generate_series(1, %(live)s + %(abandoned)s) g""",
    """create temporary table seed_batches on commit drop as
       select batch, gen_random_uuid() as batch_id, count(*) as files,
              now() - interval '1 day' - batch * interval '1 minute' as at
         from seed_docs group by batch""",
    """insert into import_batches (id, name, status, total_files, completed_files, failed_files, cancelled_files,
                                   open_files, created_at, updated_at, completed_at)
       select batch_id, 'bench-cleanup-' || batch, 'completed', files, files, 0, 0, 0, at, at, at
         from seed_batches""",
    """insert into documents (id, batch_id, source_name, content_sha256, byte_size, status, index_generation_id,
                              page_count, section_count, chunk_count, created_at, updated_at)
       select s.document_id, b.batch_id, 'live-' || s.g || '.txt',
              encode(sha256(convert_to('live/' || s.g, 'UTF8')), 'hex'), 64, 'indexed', s.generation_id,
              1, 1, %(live_chunks)s, b.at, b.at
         from seed_docs s join seed_batches b using (batch)""",
    """insert into index_generations (id, document_id, status, page_count, section_count, chunk_count,
                                      created_at, committed_at)
       select s.generation_id, s.document_id, 'committed', 1, 1, %(live_chunks)s, b.at, b.at
         from seed_docs s join seed_batches b using (batch)""",
    """insert into document_pages (document_id, index_generation_id, ordinal, content)
       select document_id, generation_id, 0, 'page of document ' || g from seed_docs""",
    """insert into document_sections (document_id, index_generation_id, ordinal, heading, content)
       select document_id, generation_id, 0, 'Document ' || g, 'section of document ' || g from seed_docs""",
    """insert into document_chunks (document_id, index_generation_id, ordinal, content, token_count)
       select s.document_id, s.generation_id, o, 'live chunk ' || o || ' of document ' || s.g, 6
         from seed_docs s cross join generate_series(0, %(live_chunks)s - 1) o""",
    """insert into ingestion_jobs (document_id, batch_id, status, stage, progress, attempt_count, next_run_at,
                                   started_at, completed_at, created_at, updated_at)
       select s.document_id, b.batch_id, 'completed', 'indexed', 100, 1, b.at, b.at, b.at, b.at, b.at
         from seed_docs s join seed_batches b using (batch)""",
    """create temporary table seed_abandoned on commit drop as
       select document_id, gen_random_uuid() as generation_id from seed_docs where abandoned""",
    """insert into index_generations (id, document_id, status, lease_token)
       select generation_id, document_id, 'abandoned', 1 from seed_abandoned""",
    """insert into document_pages (document_id, index_generation_id, ordinal, content)
       select document_id, generation_id, 0, 'abandoned page' from seed_abandoned""",
    """insert into document_sections (document_id, index_generation_id, ordinal, heading, content)
       select document_id, generation_id, 0, 'Abandoned', 'abandoned section' from seed_abandoned""",
    """insert into document_chunks (document_id, index_generation_id, ordinal, content, token_count)
       select a.document_id, a.generation_id, o,
              'abandoned chunk ' || o || ' of a build that never committed: lease fence worker queue', 12
         from seed_abandoned a cross join generate_series(0, %(abandoned_chunks)s - 1) o""",
]

# --mode zero: every document keeps its uploaded bytes, as an enqueue leaves them (until the
# document is deleted and purged). Same transaction as SCALE_SEED_SQL (it reads seed_docs).
SCALE_SOURCES_SQL = """insert into document_sources (document_id, content)
       select document_id, convert_to('live/' || g, 'UTF8') from seed_docs"""

# The seed is valid: what the foreign keys would have checked, checked once.
SCALE_CHECK_SQL = """
select (select count(*) from documents) as documents,
       (select count(*) from index_generations where status = 'committed') as committed,
       (select count(*) from index_generations where status <> 'committed') as uncommitted,
       (select count(*) from document_chunks) as chunks,
       (select count(*) from document_pages) + (select count(*) from document_sections) as pages_sections,
       (select count(*) from documents d where not exists (select 1 from index_generations g
                                                             where g.id = d.index_generation_id
                                                               and g.document_id = d.id
                                                               and g.status = 'committed')) as bad_documents,
       (select count(*) from document_chunks c where not exists (select 1 from index_generations g
                                                                  where g.id = c.index_generation_id
                                                                    and g.document_id = c.document_id)) as bad_chunks,
       (select count(*) from ingestion_jobs j where not exists (select 1 from documents d
                                                                 where d.id = j.document_id)) as bad_jobs,
       (select count(*) from document_pages p where not exists (select 1 from index_generations g
                                                                 where g.id = p.index_generation_id
                                                                   and g.document_id = p.document_id))
     + (select count(*) from document_sections s where not exists (select 1 from index_generations g
                                                                    where g.id = s.index_generation_id
                                                                      and g.document_id = s.document_id))
       as bad_pages_sections,
       (select count(*) from document_sources) as sources,
       (select count(*) from import_batches) as batches,
       (select count(*) from import_batches b
          left join (select batch_id, count(*) as total, count(*) filter (where status = 'completed') as completed
                       from ingestion_jobs group by batch_id) c on c.batch_id = b.id
         where (b.status, b.total_files, b.completed_files, b.failed_files, b.cancelled_files, b.open_files)
               is distinct from ('completed', c.total, c.total, 0, 0, 0)
            or c.completed is distinct from c.total) as bad_batches
"""

# What is left after the passes: no abandoned generation or chunk; every live row kept.
SCALE_AFTER_SQL = """
select (select count(*) from index_generations where status <> 'committed') as uncommitted,
       (select count(*) from document_chunks c join documents d on d.id = c.document_id
         where c.index_generation_id is distinct from d.index_generation_id)
     + (select count(*) from document_pages p join documents d on d.id = p.document_id
         where p.index_generation_id is distinct from d.index_generation_id)
     + (select count(*) from document_sections s join documents d on d.id = s.document_id
         where s.index_generation_id is distinct from d.index_generation_id) as stray_artifacts,
       (select count(*) from document_pages) + (select count(*) from document_sections) as pages_sections,
       (select count(*) from index_generations where status = 'committed') as committed,
       (select count(*) from document_chunks) as chunks,
       (select count(*) from documents where index_generation_id is null) as documents_without_generation
"""


def seed_scale(
    uri: str,
    live: int,
    *,
    abandoned: int,
    live_chunks: int,
    abandoned_chunks: int,
    per_batch: int | None = None,
    sources: bool = False,
) -> dict:
    """`live` indexed documents (+ `abandoned` with abandoned work), one batch per `per_batch`
    documents (default: one batch for all), with their stored bytes if `sources`; seeded
    and checked."""
    total = live + abandoned
    per_batch = per_batch or total
    params = {
        "live": live,
        "abandoned": abandoned,
        "live_chunks": live_chunks,
        "abandoned_chunks": abandoned_chunks,
        "per_batch": per_batch,
    }
    with connect(uri) as conn:
        began = time.perf_counter()
        with conn.transaction():
            for sql in SCALE_SEED_SQL + ([SCALE_SOURCES_SQL] if sources else []):
                conn.execute(sql, params)
        for table in (
            "import_batches",
            "documents",
            "index_generations",
            "document_pages",
            "document_sections",
            "document_chunks",
            "ingestion_jobs",
            "document_sources",
        ):
            conn.execute(f"vacuum (analyze) {table}")
        conn.execute("checkpoint")
        seconds = time.perf_counter() - began
        check = conn.execute(SCALE_CHECK_SQL).fetchone()
    expected = {
        "documents": total,
        "committed": total,
        "uncommitted": abandoned,
        "chunks": total * live_chunks + abandoned * abandoned_chunks,
        "pages_sections": 2 * (total + abandoned),
        "bad_documents": 0,
        "bad_chunks": 0,
        "bad_jobs": 0,
        "bad_pages_sections": 0,
        "sources": total if sources else 0,
        "batches": -(-total // per_batch),
        "bad_batches": 0,
    }
    assert check == expected, (check, expected)
    return {"seconds": seconds, **check}


def run_scale(args) -> None:
    sizes = [int(n) for n in args.live.split(",")]
    with embedded_server() as server_uri:
        print(machine_line(server_uri))
        template = "bench_cleanup_scale_template"
        print(
            f"schema: migrated up to "
            f"{schema_version(create_database(server_uri, template, migrate=True, target=args.target))}"
        )
        uris = {}
        seeds = {}
        for live in sizes:
            uris[live] = clone_database(server_uri, template, f"bench_cleanup_live_{live}")
            seeds[live] = seed_scale(
                uris[live],
                live,
                abandoned=args.abandoned,
                live_chunks=args.live_chunks,
                abandoned_chunks=args.abandoned_chunks,
            )
            print(
                f"seeded {live} live documents + {args.abandoned} with abandoned work ({seeds[live]['chunks']} "
                f"chunk rows, {args.abandoned * args.abandoned_chunks} abandoned) in {seeds[live]['seconds']:.1f}s",
                flush=True,
            )

        # Plans first (rolled back: the work to clean stays the same).
        plan_rows, plan_texts = [], []
        for live in sizes:
            for number, notices in explain_passes(uris[live], args, "json").items():
                statements: dict[str, dict] = {}  # by query text: a foreign-key action runs once per deleted row
                for notice in notices:
                    read = plan_reads(notice)
                    if read["query"].lower().startswith("select cleanup_abandoned"):
                        continue  # the top-level call: its nested statements are listed one by one
                    seen = statements.setdefault(
                        read["query"], {"calls": 0, "ms": 0.0, "seq": set(), "reads": dict.fromkeys(TABLES_READ, 0)}
                    )
                    seen["calls"] += 1
                    seen["ms"] += read["ms"]
                    seen["seq"] |= set(read["seq"])
                    for table in TABLES_READ:
                        seen["reads"][table] += read["reads"][table]
                total = live + args.abandoned
                for query, seen in statements.items():
                    whole = [t for t in ("documents", "index_generations") if seen["reads"][t] >= total]
                    plan_rows.append(
                        [
                            live,
                            number,
                            statement_label(query),
                            seen["calls"],
                            f"{seen['ms']:.2f}",
                            *[seen["reads"][t] for t in TABLES_READ],
                            ",".join(sorted(seen["seq"])) or "-",
                            ",".join(whole) or "-",
                        ]
                    )
            if args.plans:
                for number, notices in explain_passes(uris[live], args, "text").items():
                    texts: dict[str, str] = {}
                    for notice in notices:
                        query = notice.split("Query Text:", 1)[-1].split("\n", 1)[0]
                        texts.setdefault(query, notice)  # a foreign-key action's first call stands for all
                    plan_texts.append((live, number, list(texts.values())))

        # The timed passes, alternating between the databases.
        from ingestion_pipeline.db.rpc import IngestionRpc

        conns = {live: connect(uris[live]) for live in sizes}
        try:
            passes = {live: [] for live in sizes}
            cleaned = {live: {"documents": 0, "chunks": 0, "generations": 0} for live in sizes}
            active = list(sizes)
            while active:
                for live in list(active):
                    rpc = IngestionRpc(conns[live])
                    began = time.perf_counter()
                    result = rpc.cleanup_generations(limit=args.limit, dry_run=False)
                    elapsed = time.perf_counter() - began
                    if result.documents == 0:
                        active.remove(live)
                        continue
                    passes[live].append(elapsed)
                    for key in cleaned[live]:
                        cleaned[live][key] += getattr(result, key)
            after = {live: conns[live].execute(SCALE_AFTER_SQL).fetchone() for live in sizes}
        finally:
            for conn in conns.values():
                conn.close()
        for live in sizes:
            total = live + args.abandoned
            assert after[live] == {
                "uncommitted": 0,
                "stray_artifacts": 0,
                "pages_sections": 2 * total,
                "committed": total,
                "chunks": total * args.live_chunks,
                "documents_without_generation": 0,
            }, after[live]
            assert cleaned[live]["generations"] == args.abandoned, cleaned[live]
            assert cleaned[live]["chunks"] == args.abandoned * args.abandoned_chunks, cleaned[live]

        base = percentile(passes[sizes[0]], 50)
        print_table(
            f"cleanup pass with N live documents present, the same abandoned work in each: {args.abandoned} "
            f"documents x {args.abandoned_chunks} chunks, limit={args.limit} documents/pass, passes "
            "alternating between the databases",
            [
                "live documents",
                "documents",
                "chunk rows",
                "passes",
                "generations deleted",
                "chunks deleted",
                "pass p50 ms",
                "pass p99 ms",
                "pass max ms",
                "p50 / first",
                "passes 1-5 p50 ms",
                "passes 6+ p50 ms",
            ],
            [
                [
                    live,
                    live + args.abandoned,
                    seeds[live]["chunks"],
                    len(passes[live]),
                    cleaned[live]["generations"],
                    cleaned[live]["chunks"],
                    ms(percentile(passes[live], 50)),
                    ms(percentile(passes[live], 99)),
                    ms(max(passes[live])),
                    f"{percentile(passes[live], 50) / base:.2f}",
                    ms(percentile(passes[live][:5], 50)),
                    ms(percentile(passes[live][5:], 50)),
                ]
                for live in sizes
            ],
        )
        print(
            "(plpgsql plans a statement afresh for its first five runs on a connection, then may keep a generic "
            "plan: the last two columns split the passes there)"
        )
        print_table(
            "statements of passes " + args.explain_passes + " (auto_explain, ANALYZE, one connection, "
            "rolled back): rows read per table (actual rows x loops over the plan's nodes)",
            [
                "live documents",
                "pass",
                "statement",
                "calls",
                "ms",
                "documents rows",
                "generations rows",
                "jobs rows",
                "pages rows",
                "sections rows",
                "chunks rows",
                "seq scans",
                "read >= all docs",
            ],
            plan_rows,
        )
        for live, number, notices in plan_texts:
            for notice in notices:
                print(f"\n## plan, {live} live documents, pass {number}\n\n{notice}")
