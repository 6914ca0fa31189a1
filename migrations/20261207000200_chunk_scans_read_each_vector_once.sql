-- Chunk scans that read each vector once and score the words in one pass (issue 60: passages
-- p95 <= 1.5x one-hit-per-document search; hybrid p95 <= 2x lexical).
--
-- Before (migration 20261207000100), a passage search spent most of its time in three places:
-- - every chunk's cosine tested the chunk's size first (`vector_dims(...) = n`) and cast it:
--   each test read the vector out of TOAST again, and search_vector_passages computed the
--   score in its filter and again in its sort. Its scan of a scope's chunks read each vector
--   four times (123,169 buffers for the 19,798 chunks of the long-page benchmark; 36,301 now);
-- - search_chunk_scores joined its chunks to their BM25 scores with a nested loop (hash and
--   merge joins are off in the search functions, so that they use their indexes): the chunks
--   times the chunks that have the words, 1.5 million comparisons for a hybrid passage search
--   of a long-page question;
-- - the exact path of search_vector_passages held up to 60,000 chunks (about 2 ms per 1,000).
--
-- Now:
-- - search_chunk_expressions' pgvector cosine has no test per chunk: both callers score only
--   generations whose mean vector has the query's size. pgvector's avg() refuses vectors of
--   mixed sizes, so every chunk of such a generation has that size. (The real[] fallback made
--   its mean position by position: it still tests each chunk.)
-- - search_vector_passages scores each chunk once (a materialized list) and only generations
--   whose mean has the query's size; every chunk of a scope of at most 10,000 chunks (about
--   20 ms), else the chunks of the 100 documents nearest by their means (200 before).
-- - search_passages takes 12 candidate documents from each list (the lexical and the vector
--   passages'), not 20, or --limit when larger.
-- - Long-page questions (19,798 chunks: the nearest documents' path) lose nothing: passage
--   MRR@10 hybrid 0.357 -> 0.363, vector 0.190 -> 0.191, lexical 0.321 -> 0.322, recall@10
--   0.579 / 0.364 / 0.505 (was 0.579 / 0.374 / 0.495). Tried: 200 documents and 20 each
--   (0.357 / 0.195), 50 and 12 (0.365 / 0.201: fewer documents, more risk on a large corpus
--   whose means blur), 100 and 10 (hybrid recall 0.561).
-- - search_chunk_scores sums each chunk's BM25 in the same query as the chunk (a lateral
--   list of the chunk's words of the query, grouped by chunk): no join of two lists. Its rows
--   are the same (87,690 rows of 50 long-page questions compared: equal).
-- - search_ranked_documents (hybrid and vector document search) scores chunks once per
--   document it returns, its words and cosines in one call, and reads the chunks of a fused
--   document without the query's words only for the floor's test. Before, it read the
--   cosines of every fused document's chunks (twice the limit) and the words of the returned
--   ones again, and joined the two lists chunk by chunk. The same rows (60 long-page questions,
--   hybrid and vector: equal).
-- - Measured on the long-page benchmark, interleaved, the same load: a hybrid passage search
--   p95 390 -> 190 ms and mean 227 -> 138 ms at 60,000 (before the threshold); the document
--   ranking of a hybrid search p95 112 -> 73 ms (lexical search: 40 ms). Runs:
--   bench/results/passage_quality.md and search_latency.md.
--
-- Expand/contract: every function keeps its signature and columns (create or replace).

create or replace function public.search_chunk_expressions(p_dimensions integer, out cosine text, out prior text)
language plpgsql
stable
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    v_schema name;
begin
    select ns.nspname into v_schema
      from pg_catalog.pg_attribute a
      join pg_catalog.pg_type t on t.oid = a.atttypid
      join pg_catalog.pg_namespace ns on ns.oid = t.typnamespace
     where a.attrelid = 'public.document_chunks'::regclass and a.attname = 'embedding_vector'
       and not a.attisdropped;
    -- With pgvector, no test of each chunk's size: the callers score only generations whose
    -- mean vector has the query's size, and pgvector's avg() refused to make that mean from
    -- vectors of mixed sizes, so each of their chunks has it. Testing each chunk read its
    -- vector twice (vector_dims, then the distance): half the time of a scan of the chunks.
    -- A real[] mean was made position by position: there each chunk is still tested.
    cosine := case
        when v_schema is null then format($q$case when cardinality(c.embedding) = %1$s then
            (select sum(a::float8 * b) / nullif(sqrt(sum(a::float8 * a)), 0) from unnest(c.embedding, $1) as u (a, b)) / $2
            end$q$, p_dimensions)
        else format($q$1 - (c.embedding_vector operator(%1$I.<=>) $1::%1$I.vector(%2$s))$q$,
            v_schema, p_dimensions) end;  -- pgvector's operator, qualified (Supabase: `extensions`)
    -- 0 from 150 words (the chunk size), -0.17 at 5; in float arithmetic (numeric's ln made a
    -- scan of the chunks 5x slower)
    prior := '0.05 * ln(least(greatest(c.token_count, 1), 150)::float8 / 150)';
end;
$$;

create or replace function public.search_chunk_scores(p_query text, p_scope text[], p_embedding real[], p_embedder text,
                                           p_documents uuid[])
returns table (document_id uuid, index_generation_id uuid, ordinal integer, section_ordinal integer,
               page_ordinal integer, heading text, lexical double precision, cosine double precision,
               prior double precision)
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
    v_chunks float8;
    v_lexemes text[];
    v_idf float8[];
    v_any tsquery;  -- any of the query's words: the chunks scored for them
    v_cosine text;  -- SQL: a chunk's cosine (c.*), or null
    v_prior text;  -- SQL: its passage prior
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
    end if;
    select case when coalesce(v_norm, 0) = 0 then 'null::float8' else e.cosine end, e.prior
      into v_cosine, v_prior
      from public.search_chunk_expressions(v_dimensions) e;
    return query execute format($q$
        with docs as (
            select d.id, d.index_generation_id,
                   g.embedder = $3 and cardinality(g.mean_embedding) = $9 as same_model  -- and size: see
                                                                                    -- search_chunk_expressions
              from unnest($4::uuid[]) as x (id)
             cross join lateral (select d.* from public.documents d where d.id = x.id offset 0) d
             cross join lateral (select g.embedder, g.mean_embedding from public.index_generations g
                                  where g.id = d.index_generation_id offset 0) g
             where d.deleted_at is null and ($5::text[] is null or d.collection = any ($5::text[]))
        ), chunks as materialized (
            select d.id as document_id, d.index_generation_id, c.*
              from docs d
             cross join lateral (  -- only the columns used: a chunk's text is never read here
                   select c.ordinal, c.section_ordinal, c.page_ordinal, c.heading, c.token_count, %2$s as content_tsv,
                          case when d.same_model then %1$s end as cosine
                     from public.document_chunks c
                    where c.document_id = d.id and c.index_generation_id = d.index_generation_id
                    order by c.ordinal limit 1000 offset 0) c
        )  -- each chunk with its BM25 over chunks (k1 1.2, no length normalisation: chunks are
           -- of a size), a word's title counted twice once, its headings twice each: one row
           -- per chunk and word of the query, summed per chunk. No join of two lists: without
           -- hash joins (this function's settings) one took the chunks times their matches.
        select c.document_id, c.index_generation_id, c.ordinal, c.section_ordinal, c.page_ordinal, c.heading,
               coalesce(sum(t.idf * f.tf * 2.2 / (f.tf + 1.2) order by t.lexeme), 0)::float8, c.cosine::float8,
               (%3$s)::float8
          from chunks c
          left join lateral (
                select u.lexeme,
                       2 * least(cardinality(array_positions(u.weights, 'A')), 1)
                       + cardinality(array_positions(u.weights, 'B'))
                       + cardinality(u.weights) - cardinality(array_positions(u.weights, 'A')) as tf
                  from unnest(c.content_tsv) as u
                 where $8::tsquery is not null and c.content_tsv @@ $8::tsquery and u.lexeme = any ($6::text[])) f on true
          left join unnest($6::text[], $7::float8[]) as t (lexeme, idf) on t.lexeme = f.lexeme
         group by c.document_id, c.index_generation_id, c.ordinal, c.section_ordinal, c.page_ordinal, c.heading,
                  c.cosine, c.token_count$q$, v_cosine,
          case when v_any is null then 'null::tsvector' else 'c.content_tsv' end, v_prior)
        using p_embedding, v_norm, p_embedder, p_documents, p_scope, coalesce(v_lexemes, '{}'::text[]),
              coalesce(v_idf, '{}'::float8[]), v_any, v_dimensions;
end;
$$;

create or replace function public.search_vector_passages(p_embedding real[], p_collections text[], p_limit integer,
                                              p_embedder text)
returns table (document_id uuid, index_generation_id uuid, score double precision, n integer,
               chunk_ordinal integer)
language plpgsql
stable
rows 20
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
    v_dimensions integer := coalesce(cardinality(p_embedding), 0);
    -- A scope of at most this many chunks has every chunk scored (about 2 ms per 1,000); a
    -- larger one, the chunks of the 100 documents whose means are nearest (search_vector_ranked).
    -- 10,000 and 100: a passage search within 1.5x a search for documents (see the header).
    v_chunks_at_most constant integer := coalesce(nullif(pg_catalog.current_setting('ingest.vector_chunks_at_most', true), '')::integer, 10000);
    v_scope_chunks float8;
    v_norm float8;
    v_documents uuid[];
    v_generations uuid[];
    v_cosine text;  -- SQL: a chunk's cosine (c.*), null for another size's vector
    v_prior text;  -- SQL: its passage prior
begin
    if p_limit is null or p_limit < 1 or p_limit > 1000 then
        raise exception 'search_vector_passages: p_limit must be between 1 and 1000' using errcode = '22023';
    end if;
    if v_dimensions = 0 or v_dimensions > 16000 or coalesce(btrim(p_embedder), '') = ''
       or (v_scope is not null and cardinality(v_scope) = 0) then
        return;
    end if;
    select sqrt(sum(x::float8 * x)) into v_norm from unnest(p_embedding) as x;
    if v_norm is null or v_norm = 0 or v_norm = 'NaN' then
        return;
    end if;
    select coalesce(sum(s.chunks), 0) into v_scope_chunks
      from public.search_term_counts s
     where s.lexeme = '' and (v_scope is null or s.collection = any (v_scope));
    if v_scope_chunks <= v_chunks_at_most then
        -- Every live document of the scope whose committed generation the query's model made.
        select array_agg(d.id), array_agg(d.index_generation_id) into v_documents, v_generations
          from (select d.id, d.index_generation_id from public.documents d
                 where v_scope is null and d.deleted_at is null
                 union all
                select d.id, d.index_generation_id
                  from unnest(v_scope) as c (collection)
                 cross join lateral (select d.id, d.index_generation_id from public.documents d
                                      where d.collection = c.collection and d.deleted_at is null
                                      order by d.collection, coalesce(d.source_key, ''), d.id
                                     offset 0) d) d
         cross join lateral (select g.embedder from public.index_generations g
                              where g.id = d.index_generation_id offset 0) g
         where g.embedder = btrim(p_embedder);
    else
        select array_agg(r.document_id), array_agg(r.index_generation_id) into v_documents, v_generations
          from public.search_vector_ranked(p_embedding, p_collections, 100, btrim(p_embedder)) r;
    end if;
    if v_documents is null then
        return;
    end if;
    select e.cosine, e.prior into v_cosine, v_prior from public.search_chunk_expressions(v_dimensions) e;
    -- Each document's best chunk by its cosine and passage prior, then the best documents. Only
    -- generations whose mean has the query's size (search_chunk_expressions), and each chunk's
    -- score computed once (materialized): in the filter and the sort it read the vector again.
    return query execute format($q$
        with scored as materialized (
            select x.document_id, x.index_generation_id, c.ordinal, %1$s + %2$s as score
              from unnest($3::uuid[], $4::uuid[]) as x (document_id, index_generation_id)
             cross join lateral (select g.mean_embedding from public.index_generations g
                                  where g.id = x.index_generation_id offset 0) g
              join public.document_chunks c
                on c.document_id = x.document_id and c.index_generation_id = x.index_generation_id
             where cardinality(g.mean_embedding) = $6
        ), passages as (
            select distinct on (s.document_id) s.document_id, s.index_generation_id, s.ordinal, s.score
              from scored s
             where s.score is not null and s.score <> 'NaN'
             order by s.document_id, s.score desc, s.ordinal
        )
        select p.document_id, p.index_generation_id, p.score::float8,
               (row_number() over (order by p.score desc, p.document_id))::integer, p.ordinal
          from passages p
         order by p.score desc, p.document_id
         limit $5$q$, v_cosine, v_prior)
        using p_embedding, v_norm, v_documents, v_generations, p_limit, v_dimensions;
end;
$$;

-- As in 20261206001100, with the chunks scored once (see the header).
create or replace function public.search_ranked_documents(
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
    v_embedder text := btrim(p_embedder);
    v_floor float8 := public.search_vector_floor(btrim(p_embedder));
    v_documents uuid[];  -- the lexical list (hybrid)
    v_scores float8[];
    v_passages float8[];
    v_words float8 := 0;  -- how much the words decide: search_word_confidence
    v_share float8;  -- the lexical score's share of a document's
    v_passage float8;  -- the best passage's share of the lexical score
    v_vector_documents uuid[];  -- the vector list
    v_vector_generations uuid[];
    v_cosines float8[];
begin
    if p_mode = 'hybrid' then
        select array_agg(h.document_id order by h.n), array_agg(h.score order by h.n),
               array_agg(h.passage order by h.n)
          into v_documents, v_scores, v_passages
          from public.search_lexical_ranked(p_query, p_collections, v_depth) h;
        v_words := public.search_word_confidence(v_passages);
    end if;
    select array_agg(r.document_id order by r.n), array_agg(r.index_generation_id order by r.n),
           array_agg(r.score order by r.n)
      into v_vector_documents, v_vector_generations, v_cosines
      from public.search_vector_ranked(p_query_embedding, p_collections, v_depth, v_embedder) r;
    -- When the vector list's first is another document than the best passage's, the words
    -- decide less by how far it leads its list: nothing from a lead of 0.2 in cosine.
    if v_words > 0 and v_vector_documents[1] is distinct from
           (select l.document_id from unnest(v_documents, v_passages) as l (document_id, passage)
             order by l.passage desc, l.document_id limit 1) then
        v_words := v_words * greatest(0, 1 - (v_cosines[1] - coalesce(v_cosines[2], 0)) / 0.2);
    end if;
    -- Half for a look-up, a fifth for a question (migration 20261205000300), rising to four
    -- fifths as the words decide; the best passage's part of the lexical score rising from none
    -- (a look-up: a long reference page is often the answer to a name) or half (a question)
    -- to all of it.
    if public.search_query_is_question(p_query) then
        v_share := 0.2 + 0.6 * v_words;
        v_passage := 0.5 + 0.5 * v_words;
    else
        v_share := 0.5 + 0.3 * v_words;
        v_passage := v_words;
    end if;
    if p_mode = 'vector' then
        v_share := 0;
    end if;
    return query
    with lexical as materialized (
        select l.document_id, l.score, l.passage
          from unnest(v_documents, v_scores, v_passages) as l (document_id, score, passage)
    ), vector as materialized (
        select r.document_id, r.index_generation_id, r.score
          from unnest(v_vector_documents, v_vector_generations, v_cosines) as r (document_id, index_generation_id, score)
    ), fused as materialized (  -- the best twice p_limit: those whose evidence is checked
        select coalesce(l.document_id, v.document_id) as document_id, l.document_id is not null as has_words,
               case when p_mode = 'vector' then v.score  -- the cosine itself, as before
                    else v_share * ((1 - v_passage) * coalesce(l.score / nullif(t.top, 0), 0)
                                    + v_passage * coalesce(l.passage / nullif(t.passage, 0), 0))
                         + (1 - v_share) * greatest(coalesce(v.score, 0), 0) end as score
          from lexical l
          full join vector v on v.document_id = l.document_id
         cross join (select max(l.score) as top, max(l.passage) as passage from lexical l) t
         order by 3 desc, 1
         limit 2 * p_limit
    ), evidence as materialized (  -- the best cosine of each document without the words
        select s.document_id, max(s.cosine) as best
          from (select array_agg(f.document_id) as documents from fused f where not f.has_words) f
         cross join lateral public.search_chunk_scores(null, v_scope, p_query_embedding, v_embedder, f.documents) s
         group by s.document_id
    ), ranked as materialized (  -- with evidence: the query's words, or a chunk at the floor
        select f.document_id, f.score
          from fused f
          left join evidence e on e.document_id = f.document_id
         where f.has_words or v_floor is null or e.best >= v_floor
         order by f.score desc, f.document_id::text
         limit p_limit
    ), chunks as materialized (  -- the ranked documents' chunks, by their cosines and (hybrid) words
        select s.*
          from (select array_agg(r.document_id) as documents from ranked r) r
         cross join lateral public.search_chunk_scores(case when p_mode = 'hybrid' then p_query end, v_scope,
                                                       p_query_embedding, v_embedder, r.documents) s
    ), shown as (  -- each document's chunk with the best fused score
        select distinct on (c.document_id) c.document_id, c.index_generation_id, c.ordinal, c.lexical
          from chunks c
         cross join (select max(c.lexical) as top from chunks c) t
         order by c.document_id,
                  v_share * coalesce(c.lexical / nullif(t.top, 0), 0) + (1 - v_share) * coalesce(c.cosine, 0) desc,
                  c.ordinal
    )
    select r.document_id, s.index_generation_id,
           (row_number() over (order by r.score desc, r.document_id::text))::integer, r.score, s.ordinal, s.lexical
      from ranked r
      join shown s on s.document_id = r.document_id
     order by r.score desc, r.document_id::text;
end;
$$;

-- As in 20261207000100, with 12 candidate documents from each list, not 20 (see the header).
create or replace function public.search_passages(
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
begin
    perform public.search_arguments_refusal(p_query, p_mode, p_limit, 200, p_query_embedding, p_embedder);
    if p_window is null or p_window < 0 or p_window > 3 then
        raise exception 'search_passages: p_window must be between 0 and 3, got %', coalesce(p_window::text, 'null')
            using errcode = '22023';
    end if;
    if p_mode = 'lexical' then
        select array_agg(h.document_id order by h.n) into v_documents
          from public.search_lexical_hits(p_query, p_collections, greatest(p_limit, 12)) h;
    elsif p_mode = 'vector' then  -- the documents of the chunks most like the query
        select array_agg(v.document_id order by v.n) into v_documents
          from public.search_vector_passages(p_query_embedding, p_collections, greatest(p_limit, 12), p_embedder) v;
    else
        -- hybrid: the documents of the lexical list and of the best chunks. The fused document
        -- ranking (search_ranked_documents) added no passage that mattered (long-page
        -- questions: the same passages) and cost more than both lists.
        select array_agg(x.document_id order by x.n) into v_documents
          from (select distinct on (u.document_id) u.*
                  from (select h.document_id, h.n
                          from public.search_lexical_hits(p_query, p_collections, greatest(p_limit, 12)) h
                        union all
                        select v.document_id, 1000 + v.n
                          from public.search_vector_passages(p_query_embedding, p_collections, greatest(p_limit, 12),
                                                             p_embedder) v) u
                 order by u.document_id, u.n) x;
    end if;
    if v_documents is null then
        return;
    end if;
    v_highlight := public.search_highlight_query(p_query);
    return query
    with chunks as materialized (
        select s.* from public.search_chunk_scores(case when p_mode <> 'vector' then p_query end, v_scope,
                                                   case when p_mode <> 'lexical' then p_query_embedding end,
                                                   btrim(p_embedder), v_documents) s
    ), top as materialized (
        select max(c.lexical) as lexical from chunks c
    ), scored as (
        select c.*, v_share * coalesce(c.lexical / nullif(t.lexical, 0), 0)
                    + (1 - v_share) * greatest(coalesce(c.cosine + c.prior, 0), 0) as score
          from chunks c
         cross join top t
         where c.lexical > 0 or (c.cosine is not null and (v_floor is null or c.cosine >= v_floor))
         order by score desc, c.document_id::text, c.ordinal
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

select public.secure_rpc('public.search_chunk_scores(text, text[], real[], text, uuid[])', false);
select public.secure_rpc('public.search_vector_passages(real[], text[], integer, text)', false);
select public.secure_rpc('public.search_chunk_expressions(integer)', false);
