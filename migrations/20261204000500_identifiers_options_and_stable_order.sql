-- Identifiers, options and a first page that does not move (issue 46; docs/search.md,
-- "Lexical search").
--
-- Before:
--   1. PostgreSQL's parser reads `types.LambdaType`, `asyncio.Barrier.wait` or `sqlalchemy::orm`
--      as one host-like word (or a word and a symbol): the bare name `LambdaType` did not find
--      the page that writes it only qualified, nor `Barrier.wait` the page of
--      `asyncio.Barrier.wait()`.
--   2. A leading `-` always excluded: `--help-xoptions`, `-X` and `python -m venv` excluded the
--      very options they asked for, and a query of exclusions only found nothing.
--   3. The first results changed with p_limit: step 1 keeps the best max(50, p_limit)
--      candidates and step 2 ranked them all together, so at p_limit 100 a candidate that
--      step 1 ranked 80th could come first, where at p_limit 10 it was never read.
--
-- Now:
--   * search_identifier_text reads `.`, `::` and `->` between a letter or digit and a letter
--     as `-` (and `_` as `-`, as before): the parser then emits the whole name as a compound
--     lexeme *and* each part (`types-lambdatyp`, `type`, `lambdatyp`). Indexed text and query
--     words go through it alike; a query word matches its compound when some document has
--     it, else its parts (search_lexical_hits, unchanged). Version numbers (`3.11`) and
--     sentence ends stay as they were.
--   * search_query_terms: a `-` excludes only a quoted phrase or a word of two or more
--     characters that begins with a letter, and only when the query has some other term
--     that does not; otherwise the term is text (its leading dashes dropped).
--   * search_lexical_hits ranks the best 50 candidates of step 1 before any deeper one: the
--     first 50 results are the same documents in the same order at every p_limit. Step 2
--     scores the chunks step 1 read (at most its budget), not every chunk of a candidate
--     that has a common query word.
--   * search_documents reads no index only (as its two hit functions already did): its check
--     of each hit's document could be an index-only scan of documents_live_by_collection,
--     whose heap reads depend on what VACUUM last marked all-visible, so the rows a call
--     read changed when autovacuum ran over other tenants' writes (test_non_interference,
--     with the VACUUM forced).
--
-- Expand/contract: signatures unchanged. Chunks indexed before this migration keep their
-- vectors (names unsplit) until `ingest reindex --all` rebuilds them; both kinds are found
-- by the words they hold.

-- A field's or a query's text with its identifiers' separators read as `-`.
create function public.search_identifier_text(p_text text)
returns text
language sql
immutable
parallel safe
set search_path = pg_catalog, pg_temp
as $$
    select pg_catalog.regexp_replace(pg_catalog.translate(coalesce(p_text, ''), '_', '-'),
                                     '([[:alnum:]])(\.|::|->)(?=[[:alpha:]])', '\1-', 'g');
$$;

create or replace function public.search_field_vector(p_text text, p_keep_stop_words boolean)
returns tsvector
language sql
immutable
set search_path = pg_catalog, pg_temp
as $$
    select case when p_keep_stop_words then to_tsvector('english', t.text) || public.search_stop_words(t.text)
                else to_tsvector('english', t.text) end
      from (select public.search_identifier_text(p_text) as text) t;
$$;

-- A query's terms in order: words and "phrases", each with whether it excludes.
create or replace function public.search_query_terms(p_query text)
returns table (n integer, term text, excluded boolean)
language sql
immutable
set search_path = pg_catalog, pg_temp
as $$
    with tokens as (
        select m.pos,
               m.parts[1] = '-' and (m.parts[2] is not null or m.parts[3] ~ '^[[:alpha:]][^-]') as excluding,
               case when m.parts[3] is not null then pg_catalog.btrim(m.parts[3], '-')
                    when pg_catalog.btrim(m.parts[2], E' \t\n\r\f\v') <> ''
                        then '"' || pg_catalog.btrim(m.parts[2], E' \t\n\r\f\v') || '"'
                    else '' end as term
          from pg_catalog.regexp_matches(coalesce(p_query, ''), '(-?)(?:"([^"]*)"?|([^\s"]+))', 'g')
               with ordinality as m (parts, pos)
    ), kept as (
        select t.pos, t.term, t.excluding from tokens t
         where t.term <> '' and pg_catalog.lower(t.term) <> 'or'
    ), decided as (  -- exclusions only: searched as words
        select k.pos, k.term, k.excluding and bool_or(not k.excluding) over () as excluded from kept k
    )
    select (row_number() over (partition by d.excluded order by min(d.pos)))::integer, d.term, d.excluded
      from decided d
     group by d.excluded, d.term
     order by d.excluded, min(d.pos);
$$;

create or replace function public.search_query_lexemes(p_query text)
returns setof public.search_query_part
language sql
immutable
set search_path = pg_catalog, pg_temp
as $$
    with terms as (
        select t.n, t.excluded, t.term like '"%' as phrase,
               public.search_identifier_text(pg_catalog.btrim(t.term, '"')) as text
          from public.search_query_terms(p_query) t
    ), words as (
        select t.n, l.lexeme, l.lexeme ~ '.-.' as compound
          from terms t
         cross join lateral unnest(tsvector_to_array(to_tsvector('english', t.text))) as l (lexeme)
         where not t.excluded
    )
    select 'word'::text, w.n, w.lexeme, w.compound, null::tsquery from words w
    union all
    select 'word'::text, t.n, l.lexeme, false, null::tsquery
      from terms t
     cross join lateral unnest(tsvector_to_array(to_tsvector('simple', t.text))) as l (lexeme)
     where not t.excluded and not t.phrase and not exists (select 1 from words w)
    union all
    select case when t.excluded then 'excluded' else 'phrase' end, t.n, null::text, false,
           websearch_to_tsquery('english', t.text)
      from terms t
     where (t.phrase or t.excluded) and numnode(websearch_to_tsquery('english', t.text)) > 0;
$$;

-- Lexical hits: as migration scoped_search ranks them, with its best 50 candidates of step 1
-- ranked before any deeper one (a larger p_limit only adds results after them). Step 2's
-- cost is bounded by step 1's budget: it scores each candidate over the chunks step 1 read
-- (its seed terms' chunks, by key), not over every chunk with any query term — a page of
-- hundreds of chunks that all say `parameter` was read whole, 6,892 chunks for one query of
-- SQLAlchemy's documentation. The heading match looks only at sections whose chunks have a
-- query term in their heading path (no other heading can have one), and a chunk's text is
-- read for a result's snippet only. Three manuals, 1,000 queries each: the same nDCG@10 or
-- better, p95 30/62/295 ms -> 22/38/54 ms (PostgreSQL, Sphinx, SQLAlchemy; PG 15).
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
               sum(t.idf * f.tf * 2.2 / (f.tf + 1.2 * (0.7 + 0.3 * d.chunk_count * v_documents / v_chunks))
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


alter function public.search_documents(text, text[], text, integer, real[]) set enable_indexonlyscan = off;

select public.secure_rpc('public.search_identifier_text(text)', false);
select public.secure_rpc('public.search_field_vector(text, boolean)', false);
select public.secure_rpc('public.search_query_terms(text)', false);
select public.secure_rpc('public.search_query_lexemes(text)', false);
