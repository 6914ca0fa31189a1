-- A passage's words saturate sooner (issue 60: long-page questions, passage MRR@10 >= 1.25x
-- bm25s over chunks).
--
-- search_chunk_scores scores each chunk's words with BM25 over chunks. Its term frequency
-- saturated at k1 1.2, the usual value for whole documents. A chunk is a passage of about
-- 150 words: the tenth "task" in one says little more than the second, and a passage holding
-- each of the question's words once is the likelier answer than one repeating one of them.
-- k1 is now 0.6 (the lower values tuned for passage collections, such as MS MARCO's 0.82).
--
-- Measured on the long-page benchmark (bench/passage_quality.py: 107 questions, 19,798 chunks),
-- the same candidate documents and cosines, only k1 changed:
--
-- | k1 | hybrid MRR@10 | hybrid recall@10 | lexical MRR@10 |
-- | --- | --- | --- | --- |
-- | 1.2 (before) | 0.363 | 0.579 | 0.322 |
-- | 0.9 | 0.371 | 0.589 | 0.327 |
-- | 0.6 (now) | 0.381 | 0.617 | 0.328 |
-- | 0.3 | 0.383 | 0.607 | 0.317 |
--
-- 13 questions rank their answer higher and 8 lower; a bootstrap of the per-question
-- differences puts the gain's 5th percentile above zero (+0.003).
--
-- Document ranking is unchanged. search_lexical_ranked scores each lexical hit's best passage
-- too (its passages CTE, part of a document's rank in hybrid mode), and keeps k1 1.2 there:
-- at 0.6 documents moved a little and lost more than they gained (FAQ questions MRR@10 hybrid
-- 0.541 -> 0.539; PDF known-item queries, right document first 0.944 -> 0.938; the manuals'
-- nDCG@10 -0.002 to +0.001). search_chunk_scores chooses passages (search_passages) and the
-- chunk each hybrid or vector hit shows (search_ranked_documents).
--
-- Snippets only where they are shown. search_lexical_ranked highlighted a snippet in every
-- hit's chunk (ts_headline over its text): search_ranked_documents (hybrid) and
-- search_passages read its list, 50 and 12 hits, for their documents and scores only. The
-- body is now search_lexical_ranking(..., p_snippets); search_lexical_ranked calls it with
-- snippets (search_lexical_hits: lexical search shows them), the other two without. On the
-- PostgreSQL manual (1x), 150 queries of one to three words, 50 hits each, interleaved: p50
-- 6.3 -> 4.5 ms, p95 15.3 -> 9.9 ms.
--
-- A one-term look-up (`Session`, `pg_dump`, `--force`) gives the words four fifths of a hybrid
-- document's score, as a look-up gets when its words decide (search_word_confidence), instead
-- of half rising to four fifths. The query's vector is then one word's vector of a static
-- model: it says no more than the word does, and a neighbour of the word in the model's space
-- outranked the page that has the word. The three manuals, 1,000 queries each, same databases,
-- default nDCG@10 / MRR@10 (lexical: PostgreSQL 0.8651 / 0.8464, Sphinx 0.9586 / 0.9492,
-- SQLAlchemy 0.9753 / 0.9687):
--
-- | one-term share | PostgreSQL | Sphinx | SQLAlchemy |
-- | --- | --- | --- | --- |
-- | 0.5 + 0.3 x confidence (before) | 0.8586 / 0.8396 | 0.9699 / 0.9640 | 0.9654 / 0.9567 |
-- | 0.7 | 0.8586 / 0.8396 | 0.9699 / 0.9640 | 0.9687 / 0.9610 |
-- | 0.8 (now) | 0.8586 / 0.8396 | 0.9699 / 0.9640 | 0.9699 / 0.9626 |
-- | 0.85 | 0.8586 / 0.8396 | 0.9699 / 0.9640 | 0.9707 / 0.9636 |
--
-- Questions (FAQ, long pages) and known-item sentences (PDFs) have more terms: unchanged.
--
-- Expand/contract: every function keeps its signature and columns (create or replace);
-- search_lexical_ranking is new.

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
        )  -- each chunk with its BM25 over chunks (k1 0.6, no length normalisation: chunks are
           -- of a size), a word's title counted twice once, its headings twice each: one row
           -- per chunk and word of the query, summed per chunk. No join of two lists: without
           -- hash joins (this function's settings) one took the chunks times their matches.
        select c.document_id, c.index_generation_id, c.ordinal, c.section_ordinal, c.page_ordinal, c.heading,
               coalesce(sum(t.idf * f.tf * 1.6 / (f.tf + 0.6) order by t.lexeme), 0)::float8, c.cosine::float8,
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


-- search_lexical_ranked of 20261206001100 (the same ranking), its snippets only when
-- p_snippets (see the header).
create function public.search_lexical_ranking(p_query text, p_collections text[], p_limit integer,
                                              p_snippets boolean)
returns table (document_id uuid, collection text, source_uri text, source_name text, title text,
               index_generation_id uuid, chunk_ordinal integer, section_ordinal integer, page_ordinal integer,
               heading text, heading_path text, score double precision, snippet text, n integer,
               passage double precision)
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
    v_chunk_idf float8[];  -- over chunks: a passage's score
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
        raise exception 'search_lexical_ranked: p_limit must be between 1 and 5000' using errcode = '22023';
    end if;
    if v_refusal is not null then
        raise exception 'search_lexical_ranked: %', v_refusal using errcode = '22023';
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
           -- the mean of a word's IDF over documents and over chunks: see the header
           array_agg((ln(1 + (v_documents - o.documents + 0.5) / (o.documents + 0.5))
                      + ln(1 + (v_chunks - o.chunks + 0.5) / (o.chunks + 0.5))) / 2 order by o.chunks, o.lexeme),
           string_agg(public.search_lexeme_query(o.lexeme)::text, ' | ')::tsquery,
           (string_agg(public.search_lexeme_query(o.lexeme)::text, ' | ') filter (where o.postings <= v_budget))::tsquery,
           string_agg(public.search_lexeme_query(o.lexeme)::text, ' & ')::tsquery,
           array_agg(public.search_lexeme_query(o.lexeme) order by o.chunks, o.lexeme),
           array_agg(ln(1 + (v_chunks - o.chunks + 0.5) / (o.chunks + 0.5)) order by o.chunks, o.lexeme)
      into v_lexemes, v_idf, v_any, v_seed, v_every, v_queries, v_chunk_idf
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
        select t.lexeme, t.idf, t.chunk_idf from unnest(v_lexemes, v_idf, v_chunk_idf) as t (lexeme, idf, chunk_idf)
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
    ), passages as materialized (  -- each document's best chunk by BM25 over chunks, as
                                    -- search_chunk_scores scores it
        select p.document_id, max(p.score) as passage
          from (select o.document_id, o.ordinal,
                       sum(t.chunk_idf * o.tf * 2.2 / (o.tf + 1.2) order by o.lexeme) as score
                  from (select o.document_id, o.ordinal, o.lexeme,
                               2 * least(o.in_title, 1) + 2 * o.in_headings + o.in_text as tf
                          from occurrences o) o
                  join terms t using (lexeme)
                 group by o.document_id, o.ordinal) p
         group by p.document_id
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
        select d.*, bc.ordinal, b.score + bc.cover + coalesce(hm.share, 0) as total, p.passage
          from docs d
          join bm25 b on b.document_id = d.id
          join best_chunks bc on bc.document_id = d.id
          left join passages p on p.document_id = d.id
          left join heading_match hm on hm.document_id = d.id
         order by d.deeper, total desc, d.source_key, d.source_name, d.id
         limit p_limit
    )
    select r.id, r.collection, r.source_key, r.source_name, r.title, r.index_generation_id, c.ordinal,
           c.section_ordinal, c.page_ordinal, sec.heading, c.heading, r.total::float8,
           case when p_snippets then ts_headline('english', t.content, coalesce(v_highlight, v_any),
                                                  'MaxFragments=1, MinWords=8, MaxWords=30, StartSel=[, StopSel=]') end,
           (row_number() over (order by r.deeper, r.total desc, r.source_key, r.source_name, r.id))::integer,
           coalesce(r.passage, 0)::float8
      from ranked r
      join chunks c on c.document_id = r.id and c.ordinal = r.ordinal
      left join lateral (  -- the chunk's text: for its snippet only
            select x.content from public.document_chunks x
             where p_snippets and x.document_id = r.id and x.index_generation_id = r.index_generation_id
               and x.ordinal = c.ordinal
            offset 0) t on true
      left join lateral (
            select sec.heading from public.document_sections sec
             where sec.document_id = r.id and sec.index_generation_id = r.index_generation_id
               and sec.ordinal = c.section_ordinal
            offset 0) sec on true
     order by 14;
end;
$$;

-- The lexical hits with their snippets, as before (search_lexical_hits, the tests).
create or replace function public.search_lexical_ranked(p_query text, p_collections text[], p_limit integer)
returns table (document_id uuid, collection text, source_uri text, source_name text, title text,
               index_generation_id uuid, chunk_ordinal integer, section_ordinal integer, page_ordinal integer,
               heading text, heading_path text, score double precision, snippet text, n integer,
               passage double precision)
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
begin
    return query select * from public.search_lexical_ranking(p_query, p_collections, p_limit, true);
end;
$$;



-- As in 20261207000200, its lexical list without snippets (see the header).
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
          from public.search_lexical_ranking(p_query, p_collections, v_depth, false) h;
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
    -- to all of it. A one-term look-up: four fifths, as when its words decide (its vector is
    -- one word's; see the header).
    if public.search_query_is_question(p_query) then
        v_share := 0.2 + 0.6 * v_words;
        v_passage := 0.5 + 0.5 * v_words;
    elsif (select count(*) from public.search_query_terms(p_query) q where not q.excluded) = 1 then
        v_share := 0.8;
        v_passage := v_words;
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

-- As in 20261207000200, the lexical list's documents without snippets (see the header).
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
          from public.search_lexical_ranking(p_query, p_collections, greatest(p_limit, 12), false) h;
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
                          from public.search_lexical_ranking(p_query, p_collections, greatest(p_limit, 12), false) h
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
select public.secure_rpc('public.search_lexical_ranked(text, text[], integer)', false);
select public.secure_rpc('public.search_lexical_ranking(text, text[], integer, boolean)', false);
