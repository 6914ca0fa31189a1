-- Vector search finds a large scope's documents through an HNSW index of their means, not of
-- their chunks (issue 47's drain bar: a drain with the default embedder at >= 0.8x the
-- documents/s of one without).
--
-- Before: `ingest db migrate` built an HNSW index of every chunk vector
-- (document_chunks_embedding_hnsw_<n>), and a scope of more than 2,000 documents found its
-- candidates there: the documents of the nearest chunks, each then scored by its mean
-- (migration 20261205000300). Each chunk a worker wrote was inserted into that graph, ~1.9 ms
-- of the database's CPU per chunk at 256 dimensions (m 16, ef_construction 64): the drain with
-- the default embedder ran at 0.56x the documents/s of a drain without vectors, where without
-- the index it ran at 0.87x (bench/results/ingest_corpus.md).
--
-- Now: the index is index_generations_mean_hnsw_<n>, over the committed generations' mean
-- vectors (index_generations.mean_embedding, set when a generation is committed), with
-- inner-product operators: one insert per document, not one per chunk, and the index orders
-- by the document's score itself (the query's inner product with the mean, over the query's
-- norm), where the chunks' index ordered by another measure (the nearest chunk) than the one
-- the documents were ranked by. db/vector_index.py builds it (CONCURRENTLY) and drops the
-- chunks' index. The exact path (a scope of at most 2,000 documents) is unchanged, and so are
-- the scores: the same expression, on either path.
--
-- Expand/contract: the signature and columns are unchanged. Until `ingest db migrate` has
-- built the new index, a large scope's search scans the means it scores (correct, slower).

create or replace function public.search_vector_ranked(p_embedding real[], p_collections text[], p_limit integer)
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
    -- through the HNSW index of the means. `ingest.vector_exact_at_most` lowers it for a session
    -- (the tests take the HNSW path on a small corpus with 0).
    v_exact_at_most constant integer := coalesce(nullif(pg_catalog.current_setting('ingest.vector_exact_at_most', true), '')::integer, 2000);
    v_norm float8;
    v_scope_documents bigint;
    v_schema name;
    v_iterative boolean;
    v_width integer;
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
        -- The nearest documents through the HNSW index of the committed generations' means
        -- (index_generations_mean_hnsw_<n>, inner product: the score itself, so the index's
        -- order is the ranking's), the scope and the live generation checked inside the
        -- ordered scan. pgvector 0.8's iterative scan goes on until p_limit documents pass
        -- them; before 0.8 a scan returns at most ef_search rows, so it is widened until they
        -- do or it reaches pgvector's most, 1,000.
        perform pg_catalog.set_config('search_path', 'pg_catalog, ' || quote_ident(v_schema) || ', pg_temp', true);
        v_ef_search := pg_catalog.current_setting('hnsw.ef_search', true);
        v_iterative_scan := pg_catalog.current_setting('hnsw.iterative_scan', true);
        v_width := least(greatest(p_limit * 2, 40), 1000);
        v_statement := format($q$
            with nearest as materialized (
                select g.document_id, g.id as index_generation_id,
                       g.mean_embedding::vector(%1$s) <#> $1::vector(%1$s) as distance
                  from public.index_generations g
                 where g.status = 'committed' and cardinality(g.mean_embedding) = %1$s
                   and exists (select 1 from public.documents d
                                where d.id = g.document_id and d.index_generation_id = g.id
                                  and d.deleted_at is null and ($3::text[] is null or d.collection = any ($3::text[])))
                 order by g.mean_embedding::vector(%1$s) <#> $1::vector(%1$s)
                 limit $2
            ), best as (
                select n.document_id, n.index_generation_id, -n.distance / $4 as score
                  from nearest n where n.distance <> 'NaN'
            )
            select count(*),
                   array_agg(b.document_id order by b.score desc, b.document_id),
                   array_agg(b.index_generation_id order by b.score desc, b.document_id),
                   array_agg(b.score order by b.score desc, b.document_id),
                   array_agg(null::integer)
              from best b$q$, v_dimensions);
        loop
            perform pg_catalog.set_config('hnsw.ef_search', v_width::text, true);
            if v_iterative then
                perform pg_catalog.set_config('hnsw.iterative_scan', 'strict_order', true);
            end if;
            execute v_statement into v_fetched, v_documents, v_generations, v_scores, v_ordinals
                using p_embedding, p_limit, v_scope, v_norm;
            exit when v_fetched >= p_limit or v_iterative or v_width >= 1000;
            v_width := least(v_width * 2, 1000);
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
