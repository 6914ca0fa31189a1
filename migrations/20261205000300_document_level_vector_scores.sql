-- Vector search ranks documents by their mean similarity, not their best chunk's, from one
-- stored vector per document (issue 47; docs/search.md, "Modes"; docs/vector-search.md).
--
-- Before: a document's vector score was the cosine of its most similar chunk, found by
-- scoring every chunk of the scope (up to 20,000, exactly) or through the chunks' HNSW index.
-- A long page has many chunks, and one of them is near almost any question: on 224 FAQ
-- questions (bench/question_quality.py) the answer lost to long reference pages with one
-- passing chunk (vector MRR@10 0.311).
--
-- Now:
--   * index_generations.mean_embedding: the mean of a generation's chunk vectors, set when
--     the generation is committed (a trigger on its status; generations committed before are
--     filled here). The chunk vectors of every built-in embedder, and OpenAI's, are unit
--     length, so the query's cosine with this mean is the mean of its cosines with the
--     chunks: how much of the document is about the query.
--   * search_vector_hits scores documents by it. A scope of at most 2,000 documents: each
--     live document of the scope, by the index documents_live_by_collection and its committed
--     generation's primary key (one vector per document instead of one per chunk). The bound
--     was 20,000 chunks, scored one by one (~60 ms); 2,000 documents cost ~17 ms, and hold
--     9-67 chunks each in the benchmarks' manuals. Larger: the documents of the nearest chunks
--     through the HNSW index, as before, each scored by its mean (7,240 documents, 199,410
--     chunks: p50 13 ms, where scoring each document took 61 ms). The chunk shown is the document's most
--     similar one (at most its first 1,000 chunks are compared).
--   * search_vector_ranked ranks, search_vector_shown finds each hit's chunk, and
--     search_vector_hits does both; hybrid search ranks its 5 x limit deep vector list
--     without chunks and shows by them only the documents it returns from that list (the
--     question benchmark at 10x: hybrid p50 50 -> 27 ms, lexical 12 ms).
--   * The chunks are embedded under their title and heading path (the worker, this release).
-- On the 224 questions: vector MRR@10 0.311 -> 0.455, recall@10 0.536 -> 0.656 (bm25s 0.334,
-- 0.558); bench/results/question_quality.md.
--
-- Expand/contract: signatures and columns unchanged; the score is still a cosine (-1..1).
-- Workers of the release before commit through the same RPCs: the trigger fills their
-- generations' means too.

alter table public.index_generations add column mean_embedding real[];

-- The mean of a generation's chunk vectors (null when it has none): pgvector's avg in C where
-- the vectors are in its column, else over real[] in SQL.
create function public.generation_mean_embedding(p_document_id uuid, p_generation_id uuid)
returns real[]
language plpgsql
stable
set search_path = pg_catalog, pg_temp
as $$
declare
    v_schema name;
    v_mean real[];
begin
    select ns.nspname into v_schema
      from pg_catalog.pg_attribute a
      join pg_catalog.pg_type t on t.oid = a.atttypid
      join pg_catalog.pg_namespace ns on ns.oid = t.typnamespace
     where a.attrelid = 'public.document_chunks'::regclass and a.attname = 'embedding_vector'
       and not a.attisdropped;
    if v_schema is not null then
        execute format('select %1$I.avg(c.embedding_vector)::real[] from public.document_chunks c '
                       'where c.document_id = $1 and c.index_generation_id = $2 and c.embedding_vector is not null',
                       v_schema)
           into v_mean using p_document_id, p_generation_id;
        if v_mean is not null then
            return v_mean;
        end if;
    end if;
    select array_agg(m.value order by m.i) into v_mean
      from (select u.i, avg(u.x)::real as value
              from public.document_chunks c
             cross join lateral unnest(c.embedding) with ordinality as u (x, i)
             where c.document_id = p_document_id and c.index_generation_id = p_generation_id
               and c.embedding is not null
             group by u.i) m;
    return v_mean;
end;
$$;

create function public.index_generation_mean_embedding() returns trigger
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
begin
    new.mean_embedding := public.generation_mean_embedding(new.document_id, new.id);
    return new;
end;
$$;

-- WHEN: only the commit of a generation computes its mean; every other update of the row
-- (leases, heartbeats, supersession) never enters plpgsql.
create trigger index_generation_mean_embedding
    before update of status on public.index_generations
    for each row when (new.status = 'committed' and old.status is distinct from 'committed')
    execute function public.index_generation_mean_embedding();

update public.index_generations g
   set mean_embedding = public.generation_mean_embedding(g.document_id, g.id)
 where g.status = 'committed';

-- The vector ranking: the best p_limit documents by the cosine of the query with their mean
-- chunk vector; on the HNSW path each with its nearest candidate chunk (null where the
-- documents were scored directly: search_vector_shown finds it). Hybrid search shows only
-- the documents it returns; vector search shows them all (search_vector_hits).
create function public.search_vector_ranked(p_embedding real[], p_collections text[], p_limit integer)
returns table (document_id uuid, index_generation_id uuid, score double precision, n integer,
               chunk_ordinal integer)
language plpgsql
stable
rows 10  -- p_limit's order (the default, 1000, made the RPC's join to documents a scan of it)
security definer
set search_path = pg_catalog, pg_temp
set plan_cache_mode = force_custom_plan
set enable_seqscan = off  -- the scope's documents through the indexes, never a scan of all of them
set enable_bitmapscan = off
set enable_indexonlyscan = off
set enable_hashjoin = off
set enable_mergejoin = off
set client_min_messages = warning
as $$
#variable_conflict use_column
declare
    v_scope text[] := public.search_scope(p_collections);
    v_dimensions integer := cardinality(p_embedding);
    -- A scope of at most this many documents is scored exactly, each by its mean; a larger one
    -- through the chunks' HNSW index. `ingest.vector_exact_at_most` lowers it for a session
    -- (the tests take the HNSW path on a small corpus with 0).
    v_exact_at_most constant integer := coalesce(nullif(pg_catalog.current_setting('ingest.vector_exact_at_most', true), '')::integer, 2000);
    v_norm float8;
    v_scope_documents bigint;
    v_schema name;
    v_iterative boolean;
    v_most integer;
    v_candidates integer;
    v_fetched bigint;
    v_statement text;
    v_ef_search text;
    v_iterative_scan text;
    v_documents uuid[];
    v_generations uuid[];
    v_scores float8[];
    v_doc_score text;  -- SQL: a document's score from its generation's mean (g.mean_embedding)
    v_ordinals integer[];
begin
    if p_limit is null or p_limit < 1 or p_limit > 5000 then
        raise exception 'search_vector_hits: p_limit must be between 1 and 5000' using errcode = '22023';
    end if;
    if v_dimensions > 16000 then
        raise exception 'search_vector_hits: p_embedding has % dimensions; at most 16000', v_dimensions
            using errcode = '22023';
    end if;
    if v_dimensions is null or v_dimensions = 0 or (v_scope is not null and cardinality(v_scope) = 0) then
        return;
    end if;
    select sqrt(sum(x::float8 * x)) into v_norm from unnest(p_embedding) as x;
    if v_norm is null or v_norm = 0 then
        return;
    end if;
    select coalesce(sum(s.documents), 0) into v_scope_documents
      from public.search_term_counts s
     where s.lexeme = '' and (v_scope is null or s.collection = any (v_scope));
    select ns.nspname, coalesce(string_to_array(e.extversion, '.')::int[] >= array[0, 8], false)
      into v_schema, v_iterative
      from pg_catalog.pg_attribute a
      join pg_catalog.pg_type t on t.oid = a.atttypid
      join pg_catalog.pg_namespace ns on ns.oid = t.typnamespace
      left join pg_catalog.pg_extension e on e.extname = 'vector'
     where a.attrelid = 'public.document_chunks'::regclass and a.attname = 'embedding_vector'
       and not a.attisdropped;

    v_doc_score := case when v_schema is null
        then '(select sum(a::float8 * b) from unnest(g.mean_embedding, $1) as u (a, b)) / $4'
        else format('-(g.mean_embedding::%1$I.vector(%2$s) operator(%1$I.<#>) $1::%1$I.vector(%2$s)) / $4',
                    v_schema, v_dimensions) end;  -- pgvector's operator, qualified (Supabase: `extensions`)

    if v_schema is null or v_scope_documents <= v_exact_at_most then
        -- Every live document of the scope (by documents_live_by_collection; the owner's
        -- unscoped search: every live document), its committed generation's mean by primary key.
        execute format($q$
            with scored as (
                select d.id, d.index_generation_id, %1$s as score
                  from (select d.id, d.index_generation_id from public.documents d
                         where $3::text[] is null and d.deleted_at is null
                         union all
                        select d.id, d.index_generation_id
                          from unnest($3::text[]) as c (collection)
                         cross join lateral (  -- in the order of the index's keys: read through it, no sort
                               select d.id, d.index_generation_id from public.documents d
                                where d.collection = c.collection and d.deleted_at is null
                                order by d.collection, coalesce(d.source_key, ''), d.id
                               offset 0) d) d
                 cross join lateral (select g.mean_embedding from public.index_generations g
                                      where g.id = d.index_generation_id offset 0) g
                 where cardinality(g.mean_embedding) = %2$s
            ), best as (
                select s.* from scored s where s.score <> 'NaN' order by s.score desc, s.id limit $5
            )
            select array_agg(b.id order by b.score desc, b.id), array_agg(b.index_generation_id order by b.score desc, b.id),
                   array_agg(b.score order by b.score desc, b.id), array_agg(null::integer)
              from best b$q$, v_doc_score, v_dimensions)
           into v_documents, v_generations, v_scores, v_ordinals
           using p_embedding, null::integer, v_scope, v_norm, p_limit;
    else
        -- The documents of the nearest chunks through the HNSW index (the scope and the
        -- committed generation checked inside the ordered scan), fetching more until p_limit
        -- documents or the most the index returns; each scored by its mean.
        perform pg_catalog.set_config('search_path', 'pg_catalog, ' || quote_ident(v_schema) || ', pg_temp', true);
        v_ef_search := pg_catalog.current_setting('hnsw.ef_search', true);
        v_iterative_scan := pg_catalog.current_setting('hnsw.iterative_scan', true);
        v_most := case when v_iterative then 20000 else 1000 end;
        v_candidates := least(greatest(p_limit, 1) * 10, v_most);
        v_statement := format($q$
            with candidates as materialized (
                select c.document_id, c.index_generation_id, c.ordinal,
                       c.embedding_vector::vector(%1$s) <=> $1::vector(%1$s) as distance
                  from public.document_chunks c
                 where vector_dims(c.embedding_vector) = %1$s
                   and exists (select 1 from public.documents d
                                where d.id = c.document_id and d.index_generation_id = c.index_generation_id
                                  and d.deleted_at is null and ($3::text[] is null or d.collection = any ($3::text[])))
                 order by c.embedding_vector::vector(%1$s) <=> $1::vector(%1$s)
                 limit $2
            ), docs as (  -- each document's nearest candidate chunk: its most similar one
                select distinct on (k.document_id) k.document_id, k.index_generation_id, k.ordinal
                  from candidates k where k.distance <> 'NaN'
                 order by k.document_id, k.distance, k.ordinal
            ), scored as (
                select k.document_id, k.index_generation_id, k.ordinal, %2$s as score
                  from docs k
                 cross join lateral (select g.mean_embedding from public.index_generations g
                                      where g.id = k.index_generation_id offset 0) g
                 where cardinality(g.mean_embedding) = %1$s
            ), best as (
                select s.* from scored s where s.score <> 'NaN' order by s.score desc, s.document_id limit $5
            )
            select (select count(*) from candidates),
                   array_agg(b.document_id order by b.score desc, b.document_id),
                   array_agg(b.index_generation_id order by b.score desc, b.document_id),
                   array_agg(b.score order by b.score desc, b.document_id),
                   array_agg(b.ordinal order by b.score desc, b.document_id)
              from best b$q$, v_dimensions, v_doc_score);
        loop
            perform pg_catalog.set_config('hnsw.ef_search', least(greatest(v_candidates, 40), 1000)::text, true);
            if v_iterative then
                perform pg_catalog.set_config('hnsw.iterative_scan', 'strict_order', true);
            end if;
            execute v_statement into v_fetched, v_documents, v_generations, v_scores, v_ordinals
                using p_embedding, v_candidates, v_scope, v_norm, p_limit;
            exit when coalesce(cardinality(v_documents), 0) >= p_limit or v_fetched < v_candidates
                      or v_candidates >= v_most;
            v_candidates := least(v_candidates * 2, v_most);
        end loop;
        perform pg_catalog.set_config('hnsw.ef_search', coalesce(v_ef_search, '40'), true);
        if v_iterative then
            perform pg_catalog.set_config('hnsw.iterative_scan', coalesce(v_iterative_scan, 'off'), true);
        end if;
        perform pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
    end if;
    if v_documents is null then
        return;
    end if;
    return query
        select x.document_id, x.index_generation_id, x.score, x.n::integer, x.ordinal
          from unnest(v_documents, v_generations, v_scores, v_ordinals) with ordinality
               as x (document_id, index_generation_id, score, ordinal, n)
         order by x.n;
end;
$$;

-- Hits as the search RPC returns them, for ranked documents: each shown by the chunk given
-- (its ordinal), or else by its most similar chunk of its first 1,000 (by primary key: their
-- vectors only, then the text of the one shown).
create function public.search_vector_shown(p_embedding real[], p_documents uuid[], p_generations uuid[],
                                           p_scores double precision[], p_ordinals integer[])
returns table (document_id uuid, collection text, source_uri text, source_name text, title text,
               index_generation_id uuid, chunk_ordinal integer, section_ordinal integer, page_ordinal integer,
               heading text, heading_path text, score double precision, snippet text, n integer)
language plpgsql
stable
rows 10
security definer
set search_path = pg_catalog, pg_temp
set plan_cache_mode = force_custom_plan
set enable_seqscan = off
set enable_bitmapscan = off
set enable_indexonlyscan = off
set enable_hashjoin = off
set enable_mergejoin = off
set client_min_messages = warning
as $$
#variable_conflict use_column
declare
    v_dimensions integer := cardinality(p_embedding);
    v_norm float8;
    v_schema name;
    v_chunk_score text;  -- SQL: a chunk's cosine (c.*), to pick the one shown
    v_chunk_has text;  -- SQL: the chunk has a vector of the query's dimensions
    v_chunk_vector text;  -- SQL: the chunk's vector column
begin
    if coalesce(cardinality(p_documents), 0) = 0 or v_dimensions is null or v_dimensions = 0 then
        return;
    end if;
    select sqrt(sum(x::float8 * x)) into v_norm from unnest(p_embedding) as x;
    select ns.nspname into v_schema
      from pg_catalog.pg_attribute a
      join pg_catalog.pg_type t on t.oid = a.atttypid
      join pg_catalog.pg_namespace ns on ns.oid = t.typnamespace
     where a.attrelid = 'public.document_chunks'::regclass and a.attname = 'embedding_vector'
       and not a.attisdropped;
    if v_schema is null then
        v_chunk_score := $q$(select sum(a::float8 * b) / nullif(sqrt(sum(a::float8 * a)), 0)
                               from unnest(c.embedding, $1) as u (a, b)) / $4$q$;
        v_chunk_has := format('cardinality(c.embedding) = %s', v_dimensions);
        v_chunk_vector := 'c.embedding';
    else
        v_chunk_score := format('1 - (c.embedding_vector::%1$I.vector(%2$s) operator(%1$I.<=>) $1::%1$I.vector(%2$s))',
                                v_schema, v_dimensions);
        v_chunk_has := format('%I.vector_dims(c.embedding_vector) = %s', v_schema, v_dimensions);
        v_chunk_vector := 'c.embedding_vector';
    end if;
    -- Each hit shown by its most similar chunk (of its first 1,000), by primary key: their
    -- vectors only, then the text of the one shown.
    return query execute format($q$
        with hits as (
            select x.document_id, x.index_generation_id, x.score, x.ordinal, x.n
              from unnest($6::uuid[], $7::uuid[], $8::float8[], $9::integer[])
                   with ordinality as x (document_id, index_generation_id, score, ordinal, n)
        ), best as (
            select h.document_id, h.index_generation_id, h.score, h.n, c.ordinal, c.section_ordinal,
                   c.page_ordinal, c.heading
              from hits h
             cross join lateral (
                   select c.ordinal, c.section_ordinal, c.page_ordinal, c.heading
                     from (select c.ordinal, c.section_ordinal, c.page_ordinal, c.heading, %3$s
                             from public.document_chunks c
                            where c.document_id = h.document_id and c.index_generation_id = h.index_generation_id
                              and (h.ordinal is null or c.ordinal = h.ordinal)
                            order by c.ordinal limit 1000 offset 0) c
                    where %2$s
                    order by %1$s desc nulls last, c.ordinal
                    limit 1) c
        ), shown as (
            select b.*, t.content
              from best b
             cross join lateral (select t.content from public.document_chunks t
                                  where t.document_id = b.document_id and t.index_generation_id = b.index_generation_id
                                    and t.ordinal = b.ordinal offset 0) t
        )
        select s.document_id, d.collection, d.source_key, d.source_name, coalesce(d.title, d.source_name),
               s.index_generation_id, s.ordinal, s.section_ordinal, s.page_ordinal, sec.heading, s.heading,
               s.score, public.search_vector_snippet(s.content), s.n::integer
          from shown s
         cross join lateral (select d.* from public.documents d where d.id = s.document_id offset 0) d
          left join lateral (
                select sec.heading from public.document_sections sec
                 where sec.document_id = s.document_id and sec.index_generation_id = s.index_generation_id
                   and sec.ordinal = s.section_ordinal
                offset 0) sec on true
         order by s.n$q$, v_chunk_score, v_chunk_has, v_chunk_vector)
        using p_embedding, null::integer, null::text[], v_norm, null::integer, p_documents, p_generations, p_scores,
              p_ordinals;
end;
$$;

-- Vector hits: the ranking, each document shown by its most similar chunk.
create or replace function public.search_vector_hits(p_embedding real[], p_collections text[], p_limit integer)
returns table (document_id uuid, collection text, source_uri text, source_name text, title text,
               index_generation_id uuid, chunk_ordinal integer, section_ordinal integer, page_ordinal integer,
               heading text, heading_path text, score double precision, snippet text, n integer)
language plpgsql
stable
rows 10  -- p_limit's order (the default, 1000, made the RPC's join to documents a scan of it)
security definer
set search_path = pg_catalog, pg_temp
set plan_cache_mode = force_custom_plan
set enable_seqscan = off
set enable_bitmapscan = off
set enable_indexonlyscan = off
set enable_hashjoin = off
set enable_mergejoin = off
set client_min_messages = warning
as $$
#variable_conflict use_column
declare
    v_documents uuid[];
    v_generations uuid[];
    v_scores float8[];
    v_ordinals integer[];
begin
    select array_agg(r.document_id order by r.n), array_agg(r.index_generation_id order by r.n),
           array_agg(r.score order by r.n), array_agg(r.chunk_ordinal order by r.n)
      into v_documents, v_generations, v_scores, v_ordinals
      from public.search_vector_ranked(p_embedding, p_collections, p_limit) r;
    return query
        select h.* from public.search_vector_shown(p_embedding, v_documents, v_generations, v_scores, v_ordinals) h;
end;
$$;

-- A question rather than a look-up: five or more terms (search_query_terms, excluded ones not
-- counted). Lexical search normalises a question's scores for document length in full, and
-- hybrid search gives it four fifths to the vector score. The keyword benchmarks' queries
-- (index entries of three manuals) have at most four terms in 98-100% of cases; 224 FAQ
-- questions have five or more in 90%.
create function public.search_query_is_question(p_query text)
returns boolean
language sql
immutable
set search_path = pg_catalog, pg_temp
as $$
    select count(*) >= 5 from public.search_query_terms(p_query) t where not t.excluded;
$$;

-- Lexical hits: as migration 20261204000500 ranks them, with BM25's length normalisation
-- (b, over chunk counts) at 1.0 for a question instead of 0.3. Measured with each variant
-- swapped into the kept benchmark databases (bench/results/question_quality.md):
--
--   b                                  questions MRR@10   nDCG@10: Sphinx / SQLAlchemy / PostgreSQL
--   0.3 (before)                       0.286              0.959 / 0.976 / 0.866
--   0.75                               0.329              0.956 / 0.974 / 0.862
--   1.0                                0.366              0.954 / 0.973 / 0.860
--   0.3, and 1.0 for a question        0.360              0.961 / 0.976 / 0.867
--   (bm25s, for comparison)            0.334              0.829 / 0.865 / 0.803

create or replace function public.search_lexical_hits(p_query text, p_collections text[], p_limit integer)
returns table (document_id uuid, collection text, source_uri text, source_name text, title text,
               index_generation_id uuid, chunk_ordinal integer, section_ordinal integer, page_ordinal integer,
               heading text, heading_path text, score double precision, snippet text, n integer)
language plpgsql
stable
rows 10
security definer
set search_path = pg_catalog, pg_temp
set plan_cache_mode = force_custom_plan
set enable_seqscan = off  -- the candidates come from the GIN index, whatever the estimates say
set enable_bitmapscan = off  -- but for the candidates' statement (below): index scans
set enable_indexonlyscan = off
set enable_hashjoin = off  -- documents and sections by primary key, one candidate at a time,
set enable_mergejoin = off -- never a scan of the whole table to join them
set client_min_messages = warning
as $$
#variable_conflict use_column
declare
    v_scope text[] := public.search_scope(p_collections);
    v_first integer := 50;  -- ranked before any deeper candidate: the same whatever p_limit
    v_depth integer := greatest(50, p_limit);
    v_budget integer := greatest(1000, 10 * greatest(50, p_limit));
    -- BM25's length normalisation over chunk counts: mild for a look-up (a long reference page
    -- is often the answer to a name), full for a question (a short answer among long pages).
    v_b float8 := case when public.search_query_is_question(p_query) then 1.0 else 0.3 end;
    v_refusal text := public.search_query_refusal(p_query);
    v_documents float8;
    v_chunks float8;
    v_lexemes text[];
    v_idf float8[];
    v_any tsquery;
    v_seed tsquery;
    v_required tsquery;
    v_excluded tsquery;
    v_every tsquery;
    v_highlight tsquery;
    v_queries tsquery[];
    v_candidates uuid[];
    v_seed_documents uuid[];  -- the candidates' chunks step 1 read, by key: what step 2 scores
    v_seed_ordinals integer[];
    v_parts public.search_query_part[];
    v_match tsquery;
begin
    if p_limit is null or p_limit < 1 or p_limit > 5000 then
        raise exception 'search_lexical_hits: p_limit must be between 1 and 5000' using errcode = '22023';
    end if;
    if v_refusal is not null then
        raise exception 'search_lexical_hits: %', v_refusal using errcode = '22023';
    end if;
    if v_scope is not null and cardinality(v_scope) = 0 then
        return;  -- nothing readable
    end if;
    select coalesce(sum(s.documents), 0), coalesce(sum(s.chunks), 0) into v_documents, v_chunks
      from public.search_term_counts s
     where s.lexeme = '' and (v_scope is null or s.collection = any (v_scope));
    if v_documents <= 0 then
        return;  -- nothing searchable in scope
    end if;
    v_parts := array(select q from public.search_query_lexemes(p_query) q);
    select string_agg('(' || q.query::text || ')', ' & ')::tsquery into v_required
      from unnest(v_parts) q where q.kind = 'phrase';
    select string_agg('(' || q.query::text || ')', ' | ')::tsquery into v_excluded
      from unnest(v_parts) q where q.kind = 'excluded';
    -- Terms that some document in scope has, rarest first: their IDF, and the seed query of
    -- the rarest ones whose chunks fit the budget.
    with counted as (
        select q.n, q.lexeme, q.compound, c.documents, c.chunks
          from unnest(v_parts) q
         cross join lateral (
               select coalesce(sum(s.documents), 0) as documents, coalesce(sum(s.chunks), 0) as chunks
                 from public.search_term_counts s
                where s.lexeme = q.lexeme and (v_scope is null or s.collection = any (v_scope))) c
         where q.kind = 'word'
    ), terms as (  -- a word's compound when some document has it, else its other lexemes
        select distinct c.lexeme, c.documents, c.chunks
          from counted c
         where c.documents > 0
           and c.compound = exists (select 1 from counted k where k.n = c.n and k.compound and k.documents > 0)
    ), ordered as (
        select t.*, sum(t.chunks) over (order by t.chunks, t.lexeme) as postings from terms t
    )
    select array_agg(o.lexeme order by o.chunks, o.lexeme),
           array_agg(ln(1 + (v_documents - o.documents + 0.5) / (o.documents + 0.5)) order by o.chunks, o.lexeme),
           string_agg(public.search_lexeme_query(o.lexeme)::text, ' | ')::tsquery,
           (string_agg(public.search_lexeme_query(o.lexeme)::text, ' | ') filter (where o.postings <= v_budget))::tsquery,
           string_agg(public.search_lexeme_query(o.lexeme)::text, ' & ')::tsquery,
           array_agg(public.search_lexeme_query(o.lexeme) order by o.chunks, o.lexeme)
      into v_lexemes, v_idf, v_any, v_seed, v_every, v_queries
      from ordered o;
    if v_lexemes is null then
        return;  -- only excluded terms, or words no document here has
    end if;
    v_seed := coalesce(v_seed, v_every);  -- no term fits: the chunks that have them all
    -- The highlight: each distinct term once (case folded), as websearch reads it.
    select websearch_to_tsquery('english', string_agg(t.term, ' or ' order by t.first)) into v_highlight
      from (select pg_catalog.lower(q.term) as term, min(q.n) as first
              from public.search_query_terms(p_query) q where not q.excluded
             group by pg_catalog.lower(q.term)) t;

    -- 1. Candidate documents: committed chunks of live documents in scope only, through a
    -- bitmap of the GIN index (this statement only: every other read is an index scan,
    -- whatever the planner's statistics, so what a call reads does not depend on other
    -- tenants' data).
    -- One tsquery: the seed terms, the scope, the phrases and the exclusions (a planner that
    -- got them as several conditions could read the index for one and filter the others).
    v_match := v_seed;
    if v_scope is not null then
        v_match := v_match && public.search_scope_query(v_scope);
    end if;
    if v_required is not null then
        v_match := v_match && v_required;
    end if;
    if v_excluded is not null then
        v_match := v_match && !! v_excluded;
    end if;
    perform pg_catalog.set_config('enable_bitmapscan', 'on', true);
    with seeds as materialized (
        select s.document_id, s.ordinal, s.content_tsv
          from public.searchable_chunks s
         where s.content_tsv @@ v_match
         limit v_budget
    ), scored as (
        select s.document_id, max(p.score) as score
          from seeds s
         cross join lateral (select ts_filter(s.content_tsv, '{a,b}') as head) h
         cross join lateral (
               select sum(t.idf * case when h.head @@ t.query then 2 else 1 end) as score
                 from unnest(v_queries, v_idf) as t (query, idf)
                where s.content_tsv @@ t.query) p
         group by s.document_id
    ), best as materialized (
        select s.document_id, s.score from scored s order by s.score desc, s.document_id limit v_depth
    )
    select (select array_agg(b.document_id order by b.score desc, b.document_id) from best b),
           array_agg(s.document_id order by s.document_id, s.ordinal),
           array_agg(s.ordinal order by s.document_id, s.ordinal)
      into v_candidates, v_seed_documents, v_seed_ordinals
      from seeds s
     where s.document_id in (select b.document_id from best b);
    perform pg_catalog.set_config('enable_bitmapscan', 'off', true);
    if v_candidates is null then
        return;
    end if;

    -- 2. Their scores over the chunks of theirs that step 1 read (at most the budget).
    return query
    with terms as (
        select t.lexeme, t.idf from unnest(v_lexemes, v_idf) as t (lexeme, idf)
    ), docs as materialized (
        select d.id, d.collection, d.source_key, d.source_name, coalesce(d.title, d.source_name) as title,
               d.index_generation_id, greatest(d.chunk_count, 1) as chunk_count, x.rank > v_first as deeper
          from unnest(v_candidates) with ordinality as x (id, rank)
         cross join lateral (select d.* from public.documents d where d.id = x.id offset 0) d
         where d.deleted_at is null
           and (v_scope is null or d.collection = any (v_scope))
           and (v_excluded is null
                or not exists (select 1
                                 from (select c.content_tsv from public.document_chunks c
                                        where c.document_id = d.id and c.index_generation_id = d.index_generation_id
                                       offset 0) c
                                where c.content_tsv @@ v_excluded))
    ), chunks as materialized (
        select c.document_id, c.index_generation_id, c.ordinal, c.section_ordinal, c.page_ordinal, c.heading,
               c.content_tsv, ts_filter(c.content_tsv, '{b}') @@ v_any as in_headings
          from unnest(v_seed_documents, v_seed_ordinals) as k (document_id, ordinal)
          join docs d on d.id = k.document_id
         cross join lateral (  -- by the primary key: offset 0 keeps the planner from making
                               -- this a join that reads every chunk with a query term
               select c.* from public.document_chunks c
                where c.document_id = k.document_id and c.index_generation_id = d.index_generation_id
                  and c.ordinal = k.ordinal
               offset 0) c
    ), occurrences as materialized (
        select c.document_id, c.ordinal, u.lexeme,
               count(*) filter (where w.weight = 'A') as in_title,
               count(*) filter (where w.weight = 'B') as in_headings,
               count(*) filter (where w.weight = 'D') as in_text
          from chunks c
         cross join lateral unnest(c.content_tsv) as u
         cross join lateral unnest(u.weights) as w (weight)
         where u.lexeme = any (v_lexemes)
         group by c.document_id, c.ordinal, u.lexeme
    ), bm25 as materialized (
        select f.document_id,  -- each sum in lexeme order: a float sum's last bit depends on its order
               sum(t.idf * f.tf * 2.2 / (f.tf + 1.2 * (1 - v_b + v_b * d.chunk_count * v_documents / v_chunks))
                   order by f.lexeme) as score
          from (select o.document_id, o.lexeme,
                       5 * max(o.in_title) + 2 * sum(o.in_headings) + sum(o.in_text) as tf
                  from occurrences o group by o.document_id, o.lexeme) f
          join terms t using (lexeme)
          join docs d on d.id = f.document_id
         group by f.document_id
    ), chunk_cover as materialized (
        select o.document_id, o.ordinal, sum(t.idf order by o.lexeme) as covered,
               coalesce(sum(t.idf order by o.lexeme) filter (where o.in_title > 0 or o.in_headings > 0), 0) as in_head
          from occurrences o join terms t using (lexeme)
         group by o.document_id, o.ordinal
    ), best_chunks as materialized (
        select distinct on (cc.document_id) cc.document_id, cc.ordinal, cc.covered + cc.in_head as cover
          from chunk_cover cc
         order by cc.document_id, cc.covered + cc.in_head desc, cc.ordinal
    ), heading_match as materialized (  -- the section heading the query covers best
        select c.document_id, max(hm.share) as share
          from (select distinct c.document_id, c.index_generation_id, c.section_ordinal from chunks c
                 where c.in_headings) c
         cross join lateral (
               select sec.heading from public.document_sections sec
                where sec.document_id = c.document_id and sec.index_generation_id = c.index_generation_id
                  and sec.ordinal = c.section_ordinal
               offset 0) sec
         cross join lateral (
               select array_agg(w) as words from unnest(tsvector_to_array(public.search_field_vector(sec.heading, false))) as w
                where w !~ '^[0-9.]+$') hw
         cross join lateral (
               select sum(t.idf) * count(*) / cardinality(hw.words) as share
                 from terms t where t.lexeme = any (hw.words)) hm
         group by c.document_id
    ), ranked as (
        select d.*, bc.ordinal, b.score + bc.cover + coalesce(hm.share, 0) as total
          from docs d
          join bm25 b on b.document_id = d.id
          join best_chunks bc on bc.document_id = d.id
          left join heading_match hm on hm.document_id = d.id
         order by d.deeper, total desc, d.source_key, d.source_name, d.id
         limit p_limit
    )
    select r.id, r.collection, r.source_key, r.source_name, r.title, r.index_generation_id, c.ordinal,
           c.section_ordinal, c.page_ordinal, sec.heading, c.heading, r.total::float8,
           ts_headline('english', t.content, coalesce(v_highlight, v_any),
                       'MaxFragments=1, MinWords=8, MaxWords=30, StartSel=[, StopSel=]'),
           (row_number() over (order by r.deeper, r.total desc, r.source_key, r.source_name, r.id))::integer
      from ranked r
      join chunks c on c.document_id = r.id and c.ordinal = r.ordinal
     cross join lateral (
            select x.content from public.document_chunks x
             where x.document_id = r.id and x.index_generation_id = r.index_generation_id and x.ordinal = c.ordinal
            offset 0) t
      left join lateral (
            select sec.heading from public.document_sections sec
             where sec.document_id = r.id and sec.index_generation_id = r.index_generation_id
               and sec.ordinal = c.section_ordinal
            offset 0) sec on true
     order by 14;
end;
$$;

-- Hybrid: the lexical score over its list's best, and the vector score, weighed by the query's
-- length. A query of up to four terms (`to_tsvector`, `Barrier.wait`, `autovacuum naptime`)
-- looks a name or a topic up: half each, as before. From five terms on, natural-language
-- questions ("how do I get the id of the row I just inserted?"), whose words the answer need
-- not share: a fifth for the lexical score, four fifths for the vector one. Chosen with
-- bench/fusion.py over the lists of this migration (bench/results/question_quality.md):
--
--   lexical share               questions MRR@10 / recall@10   nDCG@10 ÷ lexical: Sphinx / SQLAlchemy / PostgreSQL
--   half                        0.453 / 0.696                  1.015 / 0.990 / 0.992
--   a fifth                     0.516 / 0.746                  0.954 / 0.972 / 0.754
--   half up to 4 terms, else a fifth   0.516 / 0.737          1.015 / 0.990 / 0.990
--   0.7 - 0.1 x terms, 0.2..0.5 0.513 / 0.741                  1.011 / 0.988 / 0.973
create or replace function public.search_documents(
    p_query text, p_collections text[] default null, p_mode text default 'lexical', p_limit integer default 10,
    p_query_embedding real[] default null)
returns table (document_id uuid, collection text, source_uri text, source_name text, title text, heading text,
               heading_path text, page integer, chunk_ordinal integer, snippet text, score double precision)
language plpgsql
stable
security definer
set search_path = pg_catalog, pg_temp
set plan_cache_mode = force_custom_plan
set enable_seqscan = off  -- each hit's document by primary key
set enable_bitmapscan = off
set enable_indexonlyscan = off  -- as migration 20261204000500 set it
set enable_hashjoin = off
set enable_mergejoin = off
set client_min_messages = warning
as $$
#variable_conflict use_column
declare
    v_depth integer;
    v_lexical_share float8;
    v_scope text[];
    v_refusal text;
begin
    if p_mode is null or p_mode not in ('lexical', 'vector', 'hybrid') then
        raise exception 'search_documents: unknown mode %; choose lexical, vector or hybrid', coalesce(p_mode, 'null')
            using errcode = '22023';
    end if;
    if p_limit is null or p_limit < 1 or p_limit > 1000 then
        raise exception 'search_documents: p_limit must be between 1 and 1000, got %', coalesce(p_limit::text, 'null')
            using errcode = '22023';
    end if;
    v_refusal := public.search_query_refusal(p_query);
    if v_refusal is not null then
        raise exception 'search_documents: %', v_refusal using errcode = '22023';
    end if;
    if p_mode <> 'vector' and coalesce(btrim(p_query), '') = '' then
        raise exception 'search_documents: the search query is empty' using errcode = '22023';
    end if;
    if p_mode <> 'lexical' then
        if p_query_embedding is null or cardinality(p_query_embedding) = 0 then
            raise exception 'search_documents: % search needs p_query_embedding, the query''s vector from the '
                            'embedder the documents were indexed with', p_mode using errcode = '22023';
        end if;
        if cardinality(p_query_embedding) > 16000 then
            raise exception 'search_documents: p_query_embedding has % dimensions; at most 16000',
                cardinality(p_query_embedding) using errcode = '22023';
        end if;
        if exists (select 1 from unnest(p_query_embedding) as x
                    where x is null or x in ('NaN'::real, 'Infinity'::real, '-Infinity'::real)) then
            raise exception 'search_documents: p_query_embedding holds a null, NaN or infinite value'
                using errcode = '22023';
        end if;
    end if;
    v_scope := public.search_scope(p_collections);
    v_depth := case when p_mode = 'hybrid' then p_limit * 5 else p_limit end;
    v_lexical_share := case when public.search_query_is_question(p_query) then 0.2 else 0.5 end;
    -- Hybrid ranks the vector list without its chunks (search_vector_ranked) and shows by
    -- their chunks only the documents it returns from that list (search_vector_shown): the
    -- 5 x p_limit deep list's chunks were most of hybrid's cost over lexical's.
    return query
    with lists as materialized (
        select 'lexical'::text as list, h.document_id, h.n, h.score, null::uuid as index_generation_id, h.collection,
               h.source_uri, h.source_name, h.title, h.heading, h.heading_path, h.page_ordinal, h.chunk_ordinal,
               h.snippet
          from public.search_lexical_hits(p_query, p_collections, v_depth) h
         where p_mode <> 'vector'
        union all
        select 'vector'::text, h.document_id, h.n, h.score, null::uuid, h.collection, h.source_uri, h.source_name,
               h.title, h.heading, h.heading_path, h.page_ordinal, h.chunk_ordinal, h.snippet
          from public.search_vector_hits(p_query_embedding, p_collections, v_depth) h
         where p_mode = 'vector'
        union all
        select 'vector'::text, r.document_id, r.n, r.score, r.index_generation_id, null, null, null, null, null, null,
               null, r.chunk_ordinal, null
          from public.search_vector_ranked(p_query_embedding, p_collections, v_depth) r
         where p_mode = 'hybrid'
    ), tops as (  -- each list's best score, to put the lexical scores on the cosine's 0..1 scale
        select l.list, max(l.score) as top from lists l group by l.list
    ), fused as (
        select l.document_id, min(l.n) as n,
               case when p_mode <> 'hybrid' then max(l.score)
                    else sum(case when l.list = 'lexical' then v_lexical_share * l.score / nullif(t.top, 0)
                                  else (1 - v_lexical_share) * greatest(l.score, 0) end order by l.list) end as score
          from lists l
          join tops t on t.list = l.list
         group by l.document_id
    ), shown as (
        select distinct on (l.document_id) l.*
          from lists l
         order by l.document_id, l.n, l.list
    ), chosen as materialized (
        select s.*, f.score as fused_score, f.n as fused_n
          from fused f
          join shown s on s.document_id = f.document_id
         cross join lateral (  -- the scope, once more
               select 1 from public.documents d
                where d.id = s.document_id and d.deleted_at is null and (v_scope is null or d.collection = any (v_scope))
               offset 0) d
         order by case when p_mode = 'hybrid' then -f.score else f.n end, s.document_id::text
         limit p_limit
    ), from_vectors as (  -- hybrid's documents shown from the vector list: their chunks now
        select v.*
          from (select array_agg(c.document_id) as documents, array_agg(c.index_generation_id) as generations,
                       array_agg(c.score) as scores, array_agg(c.chunk_ordinal) as ordinals
                  from chosen c where c.index_generation_id is not null) c
         cross join lateral public.search_vector_shown(p_query_embedding, c.documents, c.generations, c.scores,
                                                       c.ordinals) v
    )
    select c.document_id, coalesce(v.collection, c.collection), coalesce(v.source_uri, c.source_uri),
           coalesce(v.source_name, c.source_name), coalesce(v.title, c.title), coalesce(v.heading, c.heading),
           coalesce(v.heading_path, c.heading_path), coalesce(v.page_ordinal, c.page_ordinal) + 1,
           coalesce(v.chunk_ordinal, c.chunk_ordinal), coalesce(v.snippet, c.snippet), c.fused_score
      from chosen c
      left join lateral (select v.* from from_vectors v where v.document_id = c.document_id) v on true
     order by case when p_mode = 'hybrid' then -c.fused_score else c.fused_n end, c.document_id::text;
end;
$$;

select public.secure_rpc('public.generation_mean_embedding(uuid, uuid)', false);
select public.secure_rpc('public.index_generation_mean_embedding()', false);
select public.secure_rpc('public.search_query_is_question(text)', false);
select public.secure_rpc('public.search_vector_ranked(real[], text[], integer)', false);
select public.secure_rpc('public.search_vector_shown(real[], uuid[], uuid[], double precision[], integer[])', false);
