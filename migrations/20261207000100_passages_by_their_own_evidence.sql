-- Passages by their own evidence (issue 60): vector passages from the chunks most like the
-- query, a prior against chunks too short to carry meaning, and no document score in a
-- passage's.
--
-- Before (migration 20261206000900): search_passages took its candidates from the document
-- ranking (search_ranked_documents: in vector mode, each document by its mean vector; in
-- hybrid, the fused list and the lexical list's others), then ranked their chunks by a tenth
-- of their document's score and nine tenths of their own. A long page's mean is a blur of its
-- topics: the page holding the answer was often not among the 20 candidates, and a chunk of a
-- few words (a heading with a line under it: a tenth of the chunks of the long-page benchmark
-- are 36 characters or fewer, embedded with their title and headings) was as close to a
-- question as a paragraph that answers it, a third of the vector top 10. Long-page questions
-- (bench/passage_quality.py), passage MRR@10: vector 0.137, hybrid 0.333 (the same run).
--
-- Now:
-- - search_vector_passages: every chunk of the scope, when the scope holds at most 60,000
--   (about 2 ms per 1,000 here; `ingest.vector_chunks_at_most` changes it for a session),
--   else the chunks of the 200 documents nearest by their means (search_vector_ranked's
--   index); each document by its best chunk; the best p_limit documents. Scope and model as
--   search_vector_ranked (search_scope; generations the query's model made).
-- - A chunk's passage prior, 0.05 * ln(min(words, 150) / 150): 0 from 150 words (about 1,000
--   characters, the chunk size), -0.17 at 5 words; added to its cosine where passages are
--   ranked (search_chunk_scores returns it). Not in the floor's test: the floor stays a
--   cosine. search_chunk_expressions writes the SQL of the cosine and the prior for both
--   functions that score chunks.
-- - search_passages: vector mode's candidates are search_vector_passages'; hybrid's, those and
--   the lexical list's (no longer the fused document ranking, which added no passage that
--   mattered and cost more than both lists); a passage's score is its own (words over the
--   best chunk's, share as before, and its cosine with the prior), the document's no longer
--   part of it.
-- - Measured (bench/results/passage_quality.md; FAQ questions, keyword and PDF benchmarks
--   rank documents and are unchanged): passage MRR@10 vector 0.137 -> 0.190 (WordLlama over
--   the benchmark's chunks 0.209), hybrid 0.333 -> 0.357, lexical 0.322 -> 0.321. Ranking
--   documents by their best chunk in document search was measured too and lost on the FAQ
--   questions (hybrid MRR@10 0.544 -> 0.479 at half best chunk, half mean), as in 20261206000900.
--
-- Expand/contract: search_passages keeps its signature and columns; search_chunk_scores
-- (internal) gains a column, so it is dropped and created in this transaction.

-- squawk-ignore ban-drop-function
drop function public.search_chunk_scores(text, text[], real[], text, uuid[]);

-- The SQL of a chunk's (`c`) cosine with the query ($1, its norm $2) for a query of
-- p_dimensions (null for another size's vector, or without pgvector from real[]), and of its
-- passage prior: one text for search_chunk_scores and search_vector_passages.
create function public.search_chunk_expressions(p_dimensions integer, out cosine text, out prior text)
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
    cosine := case
        when v_schema is null then format($q$case when cardinality(c.embedding) = %1$s then
            (select sum(a::float8 * b) / nullif(sqrt(sum(a::float8 * a)), 0) from unnest(c.embedding, $1) as u (a, b)) / $2
            end$q$, p_dimensions)
        else format($q$case when %1$I.vector_dims(c.embedding_vector) = %2$s then
            1 - (c.embedding_vector::%1$I.vector(%2$s) operator(%1$I.<=>) $1::%1$I.vector(%2$s)) end$q$,
            v_schema, p_dimensions) end;  -- pgvector's operator, qualified (Supabase: `extensions`)
    -- 0 from 150 words (the chunk size), -0.17 at 5; in float arithmetic (numeric's ln made a
    -- scan of the chunks 5x slower)
    prior := '0.05 * ln(least(greatest(c.token_count, 1), 150)::float8 / 150)';
end;
$$;

-- As in 20261206000900, and each chunk's passage prior: 0.05 * ln(min(words, 150) / 150).
create function public.search_chunk_scores(p_query text, p_scope text[], p_embedding real[], p_embedder text,
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
                   select c.ordinal, c.section_ordinal, c.page_ordinal, c.heading, c.token_count, %2$s as content_tsv,
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
               coalesce(l.score, 0)::float8, c.cosine::float8, (%3$s)::float8
          from chunks c
          left join lexical l on l.document_id = c.document_id and l.ordinal = c.ordinal$q$, v_cosine,
          case when v_any is null then 'null::tsvector' else 'c.content_tsv' end, v_prior)
        using p_embedding, v_norm, p_embedder, p_documents, p_scope, coalesce(v_lexemes, '{}'::text[]),
              coalesce(v_idf, '{}'::float8[]), v_any;
end;
$$;

-- The documents of the chunks most like the query, each by its best chunk: the vector half of
-- a passage search. Internal: called by search_passages with the caller's scope.
create function public.search_vector_passages(p_embedding real[], p_collections text[], p_limit integer,
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
    -- larger one, the chunks of the 200 documents whose means are nearest (search_vector_ranked).
    v_chunks_at_most constant integer := coalesce(nullif(pg_catalog.current_setting('ingest.vector_chunks_at_most', true), '')::integer, 60000);
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
          from public.search_vector_ranked(p_embedding, p_collections, 200, btrim(p_embedder)) r;
    end if;
    if v_documents is null then
        return;
    end if;
    select e.cosine, e.prior into v_cosine, v_prior from public.search_chunk_expressions(v_dimensions) e;
    -- Each document's best chunk by its cosine and passage prior, then the best documents.
    return query execute format($q$
        with passages as (
            select distinct on (x.document_id) x.document_id, x.index_generation_id, c.ordinal, s.score
              from unnest($3::uuid[], $4::uuid[]) as x (document_id, index_generation_id)
              join public.document_chunks c
                on c.document_id = x.document_id and c.index_generation_id = x.index_generation_id
             cross join lateral (select %1$s + %2$s as score) s
             where s.score is not null and s.score <> 'NaN'
             order by x.document_id, s.score desc, c.ordinal
        )
        select p.document_id, p.index_generation_id, p.score::float8,
               (row_number() over (order by p.score desc, p.document_id))::integer, p.ordinal
          from passages p
         order by p.score desc, p.document_id
         limit $5$q$, v_cosine, v_prior)
        using p_embedding, v_norm, v_documents, v_generations, p_limit;
end;
$$;


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
          from public.search_lexical_hits(p_query, p_collections, greatest(p_limit, 20)) h;
    elsif p_mode = 'vector' then  -- the documents of the chunks most like the query
        select array_agg(v.document_id order by v.n) into v_documents
          from public.search_vector_passages(p_query_embedding, p_collections, greatest(p_limit, 20), p_embedder) v;
    else
        -- hybrid: the documents of the lexical list and of the best chunks. The fused document
        -- ranking (search_ranked_documents) added no passage that mattered (long-page
        -- questions: the same passages) and cost more than both lists.
        select array_agg(x.document_id order by x.n) into v_documents
          from (select distinct on (u.document_id) u.*
                  from (select h.document_id, h.n
                          from public.search_lexical_hits(p_query, p_collections, greatest(p_limit, 20)) h
                        union all
                        select v.document_id, 1000 + v.n
                          from public.search_vector_passages(p_query_embedding, p_collections, greatest(p_limit, 20),
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
