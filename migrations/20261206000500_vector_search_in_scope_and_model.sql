-- Vector search reads only what the reader may read, and compares the query only with vectors
-- of the query's own model (issue 58, the fifth review's defects 1 and 3).
--
-- Before (migration 20261206000400): a scope of more than 2,000 documents found its documents
-- through the HNSW index of every tenant's committed means, checking scope and liveness on the
-- rows the index returned. pgvector stops an index scan after `hnsw.max_scan_tuples` (20,000)
-- tuples, iterative or not (before 0.8: after ef_search, at most 1,000): once another tenant
-- held that many means nearer the query, or deleted documents left that many dead tuples, a
-- reader's own documents were never reached. An anonymous search over 2,001 public documents
-- returned 10 hits, then 0 (and took 4.5x as long) after a private collection gained 20,500
-- nearer documents: what a reader got, and what it cost, depended on data it may not read.
-- And a query was compared with every mean of its dimension, whatever model made it: during a
-- re-embedding into another model of the same size, its hits were the other model's documents
-- at meaningless cosines.
--
-- Now:
-- - A reader's scope (the collections it names, or all it may read when that is not every
--   one) is scored exactly, each live document by its mean, through documents_live_by_collection
--   and the generation's primary key: the rows read are the scope's, at any size of any other
--   tenant. Only a caller who reads every collection (the owner, the worker; `search_scope`
--   null) takes the shared HNSW index over more than 2,000 documents: everything in it is the
--   caller's. When that scan returns fewer than p_limit documents while the index holds more
--   (dead tuples, another model's vectors past the scan limit), the exact path answers instead.
-- - `p_embedder` names the query's model, as index_generations.embedder records it
--   (`wordllama`, `hash`, `openai:<model>`): only means of generations that model made, with
--   the query's dimensions, are scored. A committed generation from before the record
--   (migration 20261205000200) is given the name its document's metadata kept (`embedder`,
--   what those workers wrote: the same name for the packaged models and `hash`, the bare
--   `openai` for an endpoint, which no query names: re-index those); one with no name is found
--   by lexical search only until it is re-indexed.
--   search_documents takes it as `p_embedder text default null`, last; a vector or hybrid
--   search without it is refused (22023): a query's vector alone cannot say what made it.
--
-- Expand/contract: search_documents keeps its columns; the five-argument form is replaced by one
-- with p_embedder last and a default, so every earlier call resolves (lexical unchanged; a
-- vector or hybrid call of the previous release is refused in one line until it is upgraded).
-- search_vector_hits and search_vector_ranked are internal (the RPC's parts): replaced.

-- Replaced below, in this transaction, by signatures that every earlier call resolves to.
-- squawk-ignore ban-drop-function
drop function public.search_documents(text, text[], text, integer, real[]);
-- squawk-ignore ban-drop-function
drop function public.search_vector_hits(real[], text[], integer);
-- squawk-ignore ban-drop-function
drop function public.search_vector_ranked(real[], text[], integer);

-- Committed generations from before the record name the model their document's metadata kept.
update public.index_generations g
   set embedder = d.metadata ->> 'embedder', embedder_dimensions = cardinality(g.mean_embedding)
  from public.documents d
 where d.index_generation_id = g.id and g.status = 'committed' and g.embedder is null
   and g.mean_embedding is not null and coalesce(d.metadata ->> 'embedder', '') <> '';

create function public.search_vector_ranked(p_embedding real[], p_collections text[], p_limit integer,
                                            p_embedder text)
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
    -- A caller who reads every collection, over more than this many documents, finds them
    -- through the HNSW index of the means; `ingest.vector_exact_at_most` lowers it for a
    -- session (the tests take the HNSW path on a small corpus with 0). A reader's scope is
    -- always scored exactly.
    v_exact_at_most constant integer := coalesce(nullif(pg_catalog.current_setting('ingest.vector_exact_at_most', true), '')::integer, 2000);
    v_norm float8;
    v_all_documents bigint;
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
    v_ordinals integer[];
    v_doc_score text;  -- SQL: a document's score from its generation's mean (g.mean_embedding)
begin
    if p_limit is null or p_limit < 1 or p_limit > 5000 then
        raise exception 'search_vector_hits: p_limit must be between 1 and 5000' using errcode = '22023';
    end if;
    if v_dimensions > 16000 then
        raise exception 'search_vector_hits: p_embedding has % dimensions; at most 16000', v_dimensions
            using errcode = '22023';
    end if;
    if v_dimensions is null or v_dimensions = 0 or coalesce(p_embedder, '') = ''
       or (v_scope is not null and cardinality(v_scope) = 0) then
        return;
    end if;
    select sqrt(sum(x::float8 * x)) into v_norm from unnest(p_embedding) as x;
    if v_norm is null or v_norm = 0 then
        return;
    end if;
    select ns.nspname, coalesce(string_to_array(e.extversion, '.')::int[] >= array[0, 8], false)
      into v_schema, v_iterative
      from pg_catalog.pg_attribute a
      join pg_catalog.pg_type t on t.oid = a.atttypid
      join pg_catalog.pg_namespace ns on ns.oid = t.typnamespace
      left join pg_catalog.pg_extension e on e.extname = 'vector'
     where a.attrelid = 'public.document_chunks'::regclass and a.attname = 'embedding_vector'
       and not a.attisdropped;
    if v_scope is null and v_schema is not null then
        -- Every collection is the caller's: the index holds nothing it may not read.
        select coalesce(sum(s.documents), 0) into v_all_documents
          from public.search_term_counts s
         where s.lexeme = '';
    end if;

    if v_all_documents > v_exact_at_most then
        -- The nearest documents through the HNSW index of the committed generations' means
        -- (index_generations_mean_hnsw_<n>, inner product: the score itself, so the index's
        -- order is the ranking's), the model and the live generation checked inside the
        -- ordered scan. pgvector 0.8's iterative scan goes on until p_limit documents pass
        -- them (or hnsw.max_scan_tuples); before 0.8 a scan returns at most ef_search rows,
        -- so it is widened until they do or it reaches pgvector's most, 1,000.
        perform pg_catalog.set_config('search_path', 'pg_catalog, ' || quote_ident(v_schema) || ', pg_temp', true);
        v_ef_search := pg_catalog.current_setting('hnsw.ef_search', true);
        v_iterative_scan := pg_catalog.current_setting('hnsw.iterative_scan', true);
        v_width := least(greatest(p_limit * 2, 40), 1000);
        v_statement := format($q$
            with nearest as materialized (
                select g.document_id, g.id as index_generation_id,
                       g.mean_embedding::vector(%1$s) <#> $1::vector(%1$s) as distance
                  from public.index_generations g
                 where g.status = 'committed' and cardinality(g.mean_embedding) = %1$s and g.embedder = $3
                   and exists (select 1 from public.documents d
                                where d.id = g.document_id and d.index_generation_id = g.id
                                  and d.deleted_at is null)
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
                using p_embedding, p_limit, p_embedder, v_norm;
            exit when v_fetched >= p_limit or v_iterative or v_width >= 1000;
            v_width := least(v_width * 2, 1000);
        end loop;
        perform pg_catalog.set_config('hnsw.ef_search', coalesce(v_ef_search, '40'), true);
        if v_iterative then
            perform pg_catalog.set_config('hnsw.iterative_scan', coalesce(v_iterative_scan, 'off'), true);
        end if;
        perform pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
        if v_fetched < p_limit then
            -- The scan stopped at its limit (dead tuples of deleted documents, another model's
            -- means) or the index lacks some: the exact path below is complete.
            v_documents := null;
        end if;
    end if;

    if v_documents is null then  -- the index did not answer: the exact path
        v_doc_score := case when v_schema is null
            then '(select sum(a::float8 * b) from unnest(g.mean_embedding, $1) as u (a, b)) / $4'
            else format('-(g.mean_embedding::%1$I.vector(%2$s) operator(%1$I.<#>) $1::%1$I.vector(%2$s)) / $4',
                        v_schema, v_dimensions) end;  -- pgvector's operator, qualified (Supabase: `extensions`)
        -- Every live document of the scope (by documents_live_by_collection; a caller who reads
        -- every collection: every live document), its committed generation's mean by primary key,
        -- if the query's model made it.
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
                                      where g.id = d.index_generation_id and g.embedder = $2 offset 0) g
                 where cardinality(g.mean_embedding) = %2$s
            ), best as (
                select s.* from scored s where s.score <> 'NaN' order by s.score desc, s.id limit $5
            )
            select array_agg(b.id order by b.score desc, b.id), array_agg(b.index_generation_id order by b.score desc, b.id),
                   array_agg(b.score order by b.score desc, b.id), array_agg(null::integer)
              from best b$q$, v_doc_score, v_dimensions)
           into v_documents, v_generations, v_scores, v_ordinals
           using p_embedding, p_embedder, v_scope, v_norm, p_limit;
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

create function public.search_vector_hits(p_embedding real[], p_collections text[], p_limit integer,
                                          p_embedder text)
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
      from public.search_vector_ranked(p_embedding, p_collections, p_limit, p_embedder) r;
    return query
        select h.* from public.search_vector_shown(p_embedding, v_documents, v_generations, v_scores, v_ordinals) h;
end;
$$;

create function public.search_documents(
    p_query text, p_collections text[] default null, p_mode text default 'lexical', p_limit integer default 10,
    p_query_embedding real[] default null, p_embedder text default null)
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
        if coalesce(btrim(p_embedder), '') = '' then
            raise exception 'search_documents: % search needs p_embedder, the name of the model that made '
                            'p_query_embedding as the index records it (e.g. wordllama)', p_mode using errcode = '22023';
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
    -- their chunks (search_vector_shown) only the documents it returns that the lexical list
    -- did not find: the others are shown by their lexical hit.
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
          from public.search_vector_hits(p_query_embedding, p_collections, v_depth, btrim(p_embedder)) h
         where p_mode = 'vector'
        union all
        select 'vector'::text, r.document_id, r.n, r.score, r.index_generation_id, null, null, null, null, null, null,
               null, r.chunk_ordinal, null
          from public.search_vector_ranked(p_query_embedding, p_collections, v_depth, btrim(p_embedder)) r
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
         order by l.document_id, l.list <> 'lexical', l.n  -- the lexical row when there is one
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

-- Privileges as before: the parts for no app role (the worker may call the hits function, as
-- it could), the RPC for the app roles and the worker.
select public.secure_rpc('public.search_vector_ranked(real[], text[], integer, text)', false);
select public.secure_rpc('public.search_vector_hits(real[], text[], integer, text)');
select public.secure_rpc('public.search_documents(text, text[], text, integer, real[], text)');
grant execute on function public.search_documents(text, text[], text, integer, real[], text)
    to anon, authenticated, ingestion_worker;
