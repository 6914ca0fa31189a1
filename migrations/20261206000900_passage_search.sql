-- Search by passage (issue 60): chunks scored on both paths, each hit shown by its best
-- passage, no hit without evidence, and an RPC that returns passages.
--
-- Before (migration 20261206000500): hybrid showed each document by its lexical chunk, or
-- else by its most similar one; a search returned one passage per document at most; and every
-- search returned its limit, the vector list filling it with documents at cosines near 0
-- (`ingest search 'green tea'` after the tea notes were deleted: three unrelated documents
-- at 0.000-0.001).
--
-- Now:
-- - search_chunk_scores scores each chunk of given documents by its words (BM25 over chunks:
--   the IDF of chunk counts, k1 1.2, title and headings counted twice) and by its cosine with
--   the query, reading only the columns it needs, by primary key.
-- - Vector and hybrid searches rank documents as before (the lexical score over its list's
--   best, the cosine with the document's mean, weighed by the query's length); the best
--   2 x p_limit are then checked for evidence and shown by their best passage: the chunk
--   with the best fused score (its words over the best chunk's, and its cosine). Ranking a
--   document by its best chunk too (half mean, half best) was measured and lost on the FAQ
--   questions (hybrid MRR@10 0.538 -> 0.525 at 0.8 mean, 0.478 at half): kept by its mean.
-- - Evidence: a hit has the query's words (the lexical list), or a chunk whose cosine with
--   the query is at least the floor of the query's model (search_vector_floor: 0.25 for the
--   packaged WordLlama models, calibrated on the benchmarks, docs/search.md; a session, role
--   or database may set `ingest.vector_floor`). A search without evidence returns no rows.
-- - search_passages returns the best passages (chunks) of the best documents, several of one
--   document when they are the best, each with the chunks around it on request (p_window).
--
-- Expand/contract: search_documents keeps its signature and columns (replaced); the new
-- functions are new. Nothing is dropped.

-- Each chunk (the first 1,000 of each document, by ordinal) of the given documents, live and
-- in scope, of their committed generation: its lexical score for p_query (0 without a query
-- word) and its cosine with p_embedding (null without an embedding, or when the generation's
-- vectors are another model's). Internal: called by the RPCs with the caller's scope.
create function public.search_chunk_scores(p_query text, p_scope text[], p_embedding real[], p_embedder text,
                                           p_documents uuid[])
returns table (document_id uuid, index_generation_id uuid, ordinal integer, section_ordinal integer,
               page_ordinal integer, heading text, lexical double precision, cosine double precision)
language plpgsql
stable
rows 1000
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
    v_dimensions integer := coalesce(cardinality(p_embedding), 0);
    v_norm float8;
    v_schema name;
    v_chunks float8;
    v_lexemes text[];
    v_idf float8[];
    v_any tsquery;  -- any of the query's words: the chunks scored for them
    v_cosine text;  -- SQL: a chunk's cosine (c.*), or null
begin
    if coalesce(cardinality(p_documents), 0) = 0 or (p_scope is not null and cardinality(p_scope) = 0) then
        return;
    end if;
    select coalesce(sum(s.chunks), 0) into v_chunks
      from public.search_term_counts s
     where s.lexeme = '' and (p_scope is null or s.collection = any (p_scope));
    -- The query's words that some chunk in scope has, each with its IDF over chunks: a word's
    -- compound (`to-tsvector`) when some chunk has it, else its parts.
    if coalesce(btrim(p_query), '') <> '' and v_chunks > 0 then
        with counted as (
            select q.n, q.lexeme, q.compound, c.chunks
              from public.search_query_lexemes(p_query) q
             cross join lateral (
                   select coalesce(sum(s.chunks), 0) as chunks
                     from public.search_term_counts s
                    where s.lexeme = q.lexeme and (p_scope is null or s.collection = any (p_scope))) c
             where q.kind = 'word'
        ), terms as (
            select distinct c.lexeme, c.chunks
              from counted c
             where c.chunks > 0
               and c.compound = exists (select 1 from counted k where k.n = c.n and k.compound and k.chunks > 0)
        )
        select array_agg(t.lexeme order by t.lexeme),
               array_agg(ln(1 + (v_chunks - t.chunks + 0.5) / (t.chunks + 0.5)) order by t.lexeme),
               string_agg(public.search_lexeme_query(t.lexeme)::text, ' | ')::tsquery
          into v_lexemes, v_idf, v_any
          from terms t;
    end if;
    if v_dimensions > 0 and coalesce(p_embedder, '') <> '' then
        select sqrt(sum(x::float8 * x)) into v_norm from unnest(p_embedding) as x;
        select ns.nspname into v_schema
          from pg_catalog.pg_attribute a
          join pg_catalog.pg_type t on t.oid = a.atttypid
          join pg_catalog.pg_namespace ns on ns.oid = t.typnamespace
         where a.attrelid = 'public.document_chunks'::regclass and a.attname = 'embedding_vector'
           and not a.attisdropped;
    end if;
    v_cosine := case
        when coalesce(v_norm, 0) = 0 then 'null::float8'
        when v_schema is null then format($q$case when cardinality(c.embedding) = %1$s then
            (select sum(a::float8 * b) / nullif(sqrt(sum(a::float8 * a)), 0) from unnest(c.embedding, $1) as u (a, b)) / $2
            end$q$, v_dimensions)
        else format($q$case when %1$I.vector_dims(c.embedding_vector) = %2$s then
            1 - (c.embedding_vector::%1$I.vector(%2$s) operator(%1$I.<=>) $1::%1$I.vector(%2$s)) end$q$,
            v_schema, v_dimensions) end;
    return query execute format($q$
        with docs as (
            select d.id, d.index_generation_id, g.embedder = $3 as same_model
              from unnest($4::uuid[]) as x (id)
             cross join lateral (select d.* from public.documents d where d.id = x.id offset 0) d
             cross join lateral (select g.embedder from public.index_generations g
                                  where g.id = d.index_generation_id offset 0) g
             where d.deleted_at is null and ($5::text[] is null or d.collection = any ($5::text[]))
        ), chunks as materialized (
            select d.id as document_id, d.index_generation_id, c.*
              from docs d
             cross join lateral (  -- only the columns used: a chunk's text is never read here
                   select c.ordinal, c.section_ordinal, c.page_ordinal, c.heading, %2$s as content_tsv,
                          case when d.same_model then %1$s end as cosine
                     from public.document_chunks c
                    where c.document_id = d.id and c.index_generation_id = d.index_generation_id
                    order by c.ordinal limit 1000 offset 0) c
        ), lexical as (  -- BM25 over chunks (k1 1.2, no length normalisation: chunks are of
                         -- a size), a word's title counted twice once, its headings twice each
            select c.document_id, c.ordinal,
                   sum(t.idf * f.tf * 2.2 / (f.tf + 1.2) order by t.lexeme) as score
              from chunks c
             cross join lateral (
                   select u.lexeme,
                          2 * least(count(*) filter (where w.weight = 'A'), 1)
                          + 2 * count(*) filter (where w.weight = 'B')
                          + count(*) filter (where w.weight not in ('A', 'B')) as tf
                     from unnest(c.content_tsv) as u
                    cross join lateral unnest(u.weights) as w (weight)
                    where u.lexeme = any ($6::text[])
                    group by u.lexeme) f
              join unnest($6::text[], $7::float8[]) as t (lexeme, idf) on t.lexeme = f.lexeme
             where $8::tsquery is not null and c.content_tsv @@ $8::tsquery
             group by c.document_id, c.ordinal
        )
        select c.document_id, c.index_generation_id, c.ordinal, c.section_ordinal, c.page_ordinal, c.heading,
               coalesce(l.score, 0)::float8, c.cosine::float8
          from chunks c
          left join lexical l on l.document_id = c.document_id and l.ordinal = c.ordinal$q$, v_cosine,
          case when v_any is null then 'null::tsvector' else 'c.content_tsv' end)
        using p_embedding, v_norm, p_embedder, p_documents, p_scope, coalesce(v_lexemes, '{}'::text[]),
              coalesce(v_idf, '{}'::float8[]), v_any;
end;
$$;

-- The least cosine of a chunk with the query that counts as evidence for a hit without the
-- query's words, for the query's model: `ingest.vector_floor` where a session, role or
-- database sets it; else 0.25 for the packaged WordLlama models (calibrated on the
-- benchmarks: docs/search.md), and none (null: every hit counts) for a model it was not
-- calibrated for, whose cosines of unrelated texts may lie anywhere. Measured with WordLlama:
-- the best chunk of a sample document for a query about another topic 0.17 at most, for one
-- about its own 0.54 at least; on the FAQ questions (bench/question_quality.py) vector-mode
-- MRR@10 0.473 without a floor, 0.473 at 0.2, 0.467 at 0.3, 0.417 at 0.4 (hybrid 0.535,
-- 0.535, 0.528).
create function public.search_vector_floor(p_embedder text)
returns double precision
language sql
stable
set search_path = pg_catalog, pg_temp
as $$
    select coalesce(nullif(pg_catalog.current_setting('ingest.vector_floor', true), '')::float8,
                    case when p_embedder like 'wordllama%' then 0.25 end);
$$;

-- The ranked documents of a vector or hybrid search, each with the chunk it is shown by and
-- that chunk's lexical score (0: shown by its vector alone). Internal: the RPCs' part.
create function public.search_ranked_documents(
    p_query text, p_collections text[], p_mode text, p_limit integer, p_query_embedding real[], p_embedder text)
returns table (document_id uuid, index_generation_id uuid, n integer, score double precision,
               chunk_ordinal integer, chunk_lexical double precision)
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
    v_scope text[] := public.search_scope(p_collections);
    v_depth integer := greatest(p_limit * 5, 50);
    -- The lexical list's share of a hybrid score: half for a look-up, a fifth for a question
    -- (migration 20261205000300 chose it by measurement).
    v_share float8 := case when p_mode = 'vector' then 0
                           when public.search_query_is_question(p_query) then 0.2 else 0.5 end;
    v_embedder text := btrim(p_embedder);
    v_floor float8 := public.search_vector_floor(btrim(p_embedder));
begin
    return query
    with lexical as materialized (
        select h.document_id, h.score
          from public.search_lexical_hits(p_query, p_collections, v_depth) h
         where p_mode = 'hybrid'
    ), vector as materialized (
        select r.document_id, r.index_generation_id, r.score
          from public.search_vector_ranked(p_query_embedding, p_collections, v_depth, v_embedder) r
    ), fused as materialized (  -- the best twice p_limit: those whose evidence is checked
        select coalesce(l.document_id, v.document_id) as document_id, l.document_id is not null as has_words,
               case when p_mode = 'vector' then v.score  -- the cosine itself, as before
                    else v_share * coalesce(l.score / nullif(t.top, 0), 0)
                         + (1 - v_share) * greatest(coalesce(v.score, 0), 0) end as score
          from lexical l
          full join vector v on v.document_id = l.document_id
         cross join (select max(l.score) as top from lexical l) t
         order by 3 desc, 1
         limit 2 * p_limit
    ), chunks as materialized (  -- their chunks, by their cosines
        select s.*
          from (select array_agg(f.document_id) as documents from fused f) f
         cross join lateral public.search_chunk_scores(null, v_scope, p_query_embedding, v_embedder, f.documents) s
    ), ranked as materialized (  -- with evidence: the query's words, or a chunk at the floor
        select f.document_id, c.index_generation_id, f.score
          from fused f
          join (select c.document_id, c.index_generation_id, max(c.cosine) as best
                  from chunks c group by c.document_id, c.index_generation_id) c on c.document_id = f.document_id
         where f.has_words or v_floor is null or c.best >= v_floor
         order by f.score desc, f.document_id::text
         limit p_limit
    ), words as materialized (  -- the ranked documents' chunks, by their words (hybrid)
        select s.document_id, s.ordinal, s.lexical
          from (select array_agg(r.document_id) as documents from ranked r) r
         cross join lateral public.search_chunk_scores(p_query, v_scope, null, null, r.documents) s
         where p_mode = 'hybrid' and s.lexical > 0
    ), shown as (  -- each document's chunk with the best fused score
        select distinct on (c.document_id) c.document_id, c.ordinal, coalesce(w.lexical, 0) as lexical
          from ranked r
          join chunks c on c.document_id = r.document_id
          left join words w on w.document_id = c.document_id and w.ordinal = c.ordinal
         cross join (select max(w.lexical) as top from words w) t
         order by c.document_id,
                  v_share * coalesce(w.lexical / nullif(t.top, 0), 0) + (1 - v_share) * coalesce(c.cosine, 0) desc,
                  c.ordinal
    )
    select r.document_id, r.index_generation_id,
           (row_number() over (order by r.score desc, r.document_id::text))::integer, r.score, s.ordinal, s.lexical
      from ranked r
      join shown s on s.document_id = r.document_id
     order by r.score desc, r.document_id::text;
end;
$$;

-- The query's terms as ts_headline marks them in a snippet: each distinct term once.
create function public.search_highlight_query(p_query text)
returns tsquery
language sql
immutable
set search_path = pg_catalog, pg_temp
as $$
    select websearch_to_tsquery('english', string_agg(t.term, ' or ' order by t.first))
      from (select pg_catalog.lower(q.term) as term, min(q.n) as first
              from public.search_query_terms(p_query) q where not q.excluded
             group by pg_catalog.lower(q.term)) t;
$$;

-- A hit's snippet: the query's words in the chunk when it has them, else its first 30 words.
create function public.search_chunk_snippet(p_content text, p_highlight tsquery, p_has_words boolean)
returns text
language sql
immutable
set search_path = pg_catalog, pg_temp
as $$
    select case when p_has_words and p_highlight is not null
                then ts_headline('english', p_content, p_highlight,
                                 'MaxFragments=1, MinWords=8, MaxWords=30, StartSel=[, StopSel=]')
                else public.search_vector_snippet(p_content) end;
$$;

-- The search RPC: the same arguments and columns; vector and hybrid modes rank documents by
-- their passages (search_ranked_documents), show each by its best passage, and return only
-- hits with evidence. Lexical mode is as before.
create or replace function public.search_documents(
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
set enable_indexonlyscan = off
set enable_hashjoin = off
set enable_mergejoin = off
set client_min_messages = warning
as $$
#variable_conflict use_column
declare
    v_highlight tsquery;
begin
    perform public.search_arguments_refusal(p_query, p_mode, p_limit, 1000, p_query_embedding, p_embedder);
    if p_mode = 'lexical' then
        return query
            select h.document_id, h.collection, h.source_uri, h.source_name, h.title, h.heading, h.heading_path,
                   h.page_ordinal + 1, h.chunk_ordinal, h.snippet, h.score
              from public.search_lexical_hits(p_query, p_collections, p_limit) h
             order by h.n;
        return;
    end if;
    v_highlight := public.search_highlight_query(p_query);
    return query
        select r.document_id, d.collection, d.source_key, d.source_name, coalesce(d.title, d.source_name),
               sec.heading, c.heading, c.page_ordinal + 1, r.chunk_ordinal,
               public.search_chunk_snippet(c.content, v_highlight, r.chunk_lexical > 0), r.score
          from public.search_ranked_documents(p_query, p_collections, p_mode, p_limit, p_query_embedding,
                                              p_embedder) r
         cross join lateral (select d.* from public.documents d where d.id = r.document_id offset 0) d
         cross join lateral (select c.* from public.document_chunks c
                              where c.document_id = r.document_id and c.index_generation_id = r.index_generation_id
                                and c.ordinal = r.chunk_ordinal offset 0) c
          left join lateral (select sec.heading from public.document_sections sec
                              where sec.document_id = r.document_id and sec.index_generation_id = r.index_generation_id
                                and sec.ordinal = c.section_ordinal offset 0) sec on true
         order by r.n;
end;
$$;

-- The arguments' checks of the search RPCs, one refusal each (22023), as search_documents
-- made them since migration 20261206000500.
create function public.search_arguments_refusal(p_query text, p_mode text, p_limit integer, p_most integer,
                                                p_query_embedding real[], p_embedder text)
returns void
language plpgsql
immutable
set search_path = pg_catalog, pg_temp
as $$
declare
    v_refusal text;
begin
    if p_mode is null or p_mode not in ('lexical', 'vector', 'hybrid') then
        raise exception 'search_documents: unknown mode %; choose lexical, vector or hybrid', coalesce(p_mode, 'null')
            using errcode = '22023';
    end if;
    if p_limit is null or p_limit < 1 or p_limit > p_most then
        raise exception 'search_documents: p_limit must be between 1 and %, got %', p_most,
            coalesce(p_limit::text, 'null') using errcode = '22023';
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
end;
$$;

-- Passages: the best chunks of the best documents, best first, several of a document when
-- they are the best. The documents are the search's (as search_documents ranks them, at least
-- 20 deep; in hybrid mode also the lexical list's, as deep); each of their chunks scores a
-- tenth of its document's score (over the best document's) and nine tenths its own: its words
-- (over the best chunk's) and its cosine, half each in hybrid mode. Measured on the long-page
-- questions (bench/passage_quality.py), passage MRR@10 in lexical mode: half the document's
-- 0.296, a fifth 0.322, a tenth 0.323, none 0.324. A passage needs evidence as a hit does.
-- p_window: the chunks on each side given with it as `context` (0-3), in order, the
-- passage's included.
create function public.search_passages(
    p_query text, p_collections text[] default null, p_mode text default 'lexical', p_limit integer default 10,
    p_query_embedding real[] default null, p_embedder text default null, p_window integer default 0)
returns table (document_id uuid, collection text, source_uri text, source_name text, title text, heading text,
               heading_path text, page integer, chunk_ordinal integer, snippet text, score double precision,
               content text, context text)
language plpgsql
stable
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
    v_scope text[] := public.search_scope(p_collections);
    -- A passage's words and its cosine, half each in hybrid mode: a question's passage shares
    -- its words more often than its page does (long-page questions, passage MRR@10: a fifth
    -- 0.296, half 0.333; bench/results/passage_quality.md).
    v_share float8 := case when p_mode = 'vector' then 0 when p_mode = 'lexical' then 1 else 0.5 end;
    v_floor float8 := public.search_vector_floor(btrim(p_embedder));
    v_highlight tsquery;
    v_documents uuid[];
    v_scores float8[];
begin
    perform public.search_arguments_refusal(p_query, p_mode, p_limit, 200, p_query_embedding, p_embedder);
    if p_window is null or p_window < 0 or p_window > 3 then
        raise exception 'search_passages: p_window must be between 0 and 3, got %', coalesce(p_window::text, 'null')
            using errcode = '22023';
    end if;
    if p_mode = 'lexical' then
        select array_agg(h.document_id order by h.n), array_agg(h.score order by h.n) into v_documents, v_scores
          from public.search_lexical_hits(p_query, p_collections, greatest(p_limit, 20)) h;
    else
        -- hybrid: the search's documents, then the lexical list's others (their document
        -- score 0): a question's hybrid ranking leans on the documents' means, and a long page
        -- holding the answer's words is often below them
        select array_agg(x.document_id order by x.n), array_agg(x.score order by x.n) into v_documents, v_scores
          from (select distinct on (u.document_id) u.*
                  from (select r.document_id, r.score, r.n
                          from public.search_ranked_documents(p_query, p_collections, p_mode, greatest(p_limit, 20),
                                                              p_query_embedding, p_embedder) r
                        union all
                        select h.document_id, 0, 1000 + h.n
                          from public.search_lexical_hits(p_query, p_collections, greatest(p_limit, 20)) h
                         where p_mode = 'hybrid') u
                 order by u.document_id, u.n) x;
    end if;
    if v_documents is null then
        return;
    end if;
    v_highlight := public.search_highlight_query(p_query);
    return query
    with documents as (
        select x.document_id, x.score / nullif(max(x.score) over (), 0) as share
          from unnest(v_documents, v_scores) as x (document_id, score)
    ), chunks as materialized (
        select s.* from public.search_chunk_scores(case when p_mode <> 'vector' then p_query end, v_scope,
                                                   case when p_mode <> 'lexical' then p_query_embedding end,
                                                   btrim(p_embedder), v_documents) s
    ), top as materialized (
        select max(c.lexical) as lexical from chunks c
    ), scored as (
        select c.*, 0.1 * coalesce(d.share, 0)
                    + 0.9 * (v_share * coalesce(c.lexical / nullif(t.lexical, 0), 0)
                             + (1 - v_share) * greatest(coalesce(c.cosine, 0), 0)) as score
          from chunks c
          join documents d on d.document_id = c.document_id
         cross join top t
         where c.lexical > 0 or (c.cosine is not null and (v_floor is null or c.cosine >= v_floor))
         order by 9 desc, c.document_id::text, c.ordinal
         limit p_limit
    )
    select s.document_id, d.collection, d.source_key, d.source_name, coalesce(d.title, d.source_name), sec.heading,
           s.heading, s.page_ordinal + 1, s.ordinal, public.search_chunk_snippet(c.content, v_highlight, s.lexical > 0),
           s.score, c.content, w.context
      from scored s
     cross join lateral (select d.* from public.documents d where d.id = s.document_id offset 0) d
     cross join lateral (select c.content from public.document_chunks c
                          where c.document_id = s.document_id and c.index_generation_id = s.index_generation_id
                            and c.ordinal = s.ordinal offset 0) c
      left join lateral (select sec.heading from public.document_sections sec
                          where sec.document_id = s.document_id and sec.index_generation_id = s.index_generation_id
                            and sec.ordinal = s.section_ordinal offset 0) sec on true
     cross join lateral (select string_agg(x.content, E'\n\n' order by x.ordinal) as context
                           from (select x.ordinal, x.content from public.document_chunks x
                                  where x.document_id = s.document_id and x.index_generation_id = s.index_generation_id
                                    and x.ordinal between s.ordinal - p_window and s.ordinal + p_window
                                  order by x.ordinal offset 0) x) w
     order by s.score desc, s.document_id::text, s.ordinal;
end;
$$;

-- Privileges: the parts for no app role, the RPCs for the app roles and the worker.
select public.secure_rpc('public.search_chunk_scores(text, text[], real[], text, uuid[])', false);
select public.secure_rpc('public.search_vector_floor(text)', false);
select public.secure_rpc('public.search_ranked_documents(text, text[], text, integer, real[], text)', false);
select public.secure_rpc('public.search_highlight_query(text)', false);
select public.secure_rpc('public.search_chunk_snippet(text, tsquery, boolean)', false);
select public.secure_rpc('public.search_arguments_refusal(text, text, integer, integer, real[], text)', false);
select public.secure_rpc('public.search_documents(text, text[], text, integer, real[], text)');
select public.secure_rpc('public.search_passages(text, text[], text, integer, real[], text, integer)');
grant execute on function public.search_documents(text, text[], text, integer, real[], text)
    to anon, authenticated, ingestion_worker;
grant execute on function public.search_passages(text, text[], text, integer, real[], text, integer)
    to anon, authenticated, ingestion_worker;
