-- Hybrid search that trusts the words when they decide (issues 59 and 60): a lexical IDF over
-- documents and chunks, each lexical hit's best passage, and a fusion weighed by how far the
-- best passage stands above the other documents'.
--
-- Before (migrations 20261205000300, 20261206000900): a word's IDF counted documents only; a
-- hybrid score was the lexical score over the list's best and the cosine with the document's
-- mean, the lexical share fixed by the query's length (half up to four terms, else a fifth).
-- On the PDF benchmark (bench/pdf_quality.py: sentences of a manual, words dropped) the
-- default mode found the right document first for 0.688 of the queries, lexical 0.750 and
-- bm25s over pdftotext's pages 0.840: a manual of 480 pages is one document, nearly every
-- word is in nearly every manual (its IDF near nothing), and the mean vector of a long
-- document is a blur of its topics, which a fifth for the words could not outweigh.
--
-- Now:
-- - IDF: the mean of a word's IDF over the documents in scope and over their chunks.
-- - search_lexical_ranked: the lexical hits as before, each with `passage`, its best chunk's
--   BM25 over chunks (search_chunk_scores' score), from the chunks the search read anyway.
--   search_lexical_hits returns its columns but that one.
-- - search_word_confidence: how far the list's best passage stands above the best passage of
--   any other document, from 0 (a lead of 5% or less) to 1 (30% or more). In the benchmarks a
--   lead of 30% or more put the right document first for 188 of 188 PDF queries, and for 8 of
--   18 FAQ questions (the vector list's first: 10).
-- - Hybrid: the lexical share rises with that confidence, from a fifth (a question) or a half
--   (a look-up) to four fifths, and the lexical score moves to its best passage's BM25 alone
--   (over the list's best), from the document's (a look-up) or half each (a question). When
--   the vector list's first is another document, the confidence falls by how far it leads its list
--   (to nothing at a lead of 0.2 in cosine): on the FAQ questions a lexical lead that was wrong
--   was often met by a clear vector lead, on the PDFs by none. The best passage shown moves
--   with the same share.
--
-- Measured with bench/fusion.py's lists and then in SQL, in the kept benchmark databases:
--
--                                     PDF known-item: document / page first   FAQ MRR@10 / recall@10   nDCG@10 Sphinx / SQLAlchemy / PostgreSQL
--   before                            0.688 / 0.599                           0.538 / 0.772            0.973 / 0.966 / 0.853
--   this migration                    0.849 / 0.790 (index at b60c3d7)        0.540 / 0.768            0.970 / 0.965 / 0.856
--                                     0.836 / 0.784 (index at d16d58b)
--   (bm25s over pdftotext's pages     0.840 / 0.765; lexical mode here: PDF 0.818 / 0.728, FAQ 0.360,
--    keyword manuals 0.959 / 0.975 / 0.864)
-- The variants measured on the way: bench/results/question_quality.md, run 4.
--
-- Expand/contract: search_lexical_hits and search_ranked_documents keep their signatures and
-- columns (replaced); search_lexical_ranked and search_word_confidence are new.

-- The lexical hits, ranked as migration 20261205000300 ranks them with the IDF above, each
-- with its best passage's score. Internal: search_lexical_hits and the hybrid ranking read it.
create function public.search_lexical_ranked(p_query text, p_collections text[], p_limit integer)
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
           ts_headline('english', t.content, coalesce(v_highlight, v_any),
                       'MaxFragments=1, MinWords=8, MaxWords=30, StartSel=[, StopSel=]'),
           (row_number() over (order by r.deeper, r.total desc, r.source_key, r.source_name, r.id))::integer,
           coalesce(r.passage, 0)::float8
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

-- The lexical hits as before, from search_lexical_ranked (the IDF above).
create or replace function public.search_lexical_hits(p_query text, p_collections text[], p_limit integer)
returns table (document_id uuid, collection text, source_uri text, source_name text, title text,
               index_generation_id uuid, chunk_ordinal integer, section_ordinal integer, page_ordinal integer,
               heading text, heading_path text, score double precision, snippet text, n integer)
language sql
stable
rows 10
security definer
set search_path = pg_catalog, pg_temp
set plan_cache_mode = force_custom_plan  -- as before: search_lexical_ranked sets its own too
set enable_seqscan = off
set enable_bitmapscan = off
set enable_indexonlyscan = off
set enable_hashjoin = off
set enable_mergejoin = off
set client_min_messages = warning
as $$
    select h.document_id, h.collection, h.source_uri, h.source_name, h.title, h.index_generation_id, h.chunk_ordinal,
           h.section_ordinal, h.page_ordinal, h.heading, h.heading_path, h.score, h.snippet, h.n
      from public.search_lexical_ranked(p_query, p_collections, p_limit) h
     order by h.n;
$$;

-- How far the best passage of the lexical list's first document stands above the best of any
-- other document's (0: a tie, 1: no other document has the query's words), turned into a
-- weight from 0 (a gap of 0.05 or less) to 1 (0.3 or more): how much a hybrid search trusts
-- the words (see the header).
create function public.search_word_confidence(p_passages double precision[])
returns double precision
language sql
immutable
set search_path = pg_catalog, pg_temp
as $$
    select coalesce((
        select least(greatest((1 - coalesce(x.second, 0) / x.first - 0.05) / 0.25, 0), 1)
          from (select (select max(p) from unnest(p_passages) p) as first,
                       (select p from unnest(p_passages) p order by p desc nulls last offset 1 limit 1) as second) x
         where x.first > 0), 0);
$$;
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


select public.secure_rpc('public.search_lexical_ranked(text, text[], integer)', false);
select public.secure_rpc('public.search_word_confidence(double precision[])', false);
