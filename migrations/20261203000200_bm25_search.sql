-- Lexical search ranked like BM25, at a cost bounded by the hits it returns (issue 35;
-- docs/search.md, "Lexical search").
--
-- Before: search_lexical_hits scored every chunk that had any query word, so a query of
-- common words read most of the index (seconds at 100k chunks), took its term weights from
-- the planner's row estimate of document_chunks (ANALYZE changed the ranking), and the
-- English configuration cut identifiers apart (`pg_am` was searched as `pg`).
--
-- Now:
--   * Identifiers stay whole. Chunk vectors are built from the text with `_` read as `-`:
--     PostgreSQL's parser then emits `pg_am` as the compound lexeme 'pg-am' and its parts
--     ('pg'); a query word with a compound searches for the compound alone. Title and
--     heading vectors also keep their stop words ('all', 'only', …), so a query made of
--     stop words finds the pages with those words in a heading.
--   * Term statistics per collection: search_term_counts holds, per collection and lexeme,
--     how many searchable documents and chunks have it (lexeme '' counts the documents
--     and chunks themselves). A trigger on documents appends a delta row whenever a
--     document's searchable generation changes (a commit, a new version, a delete), in
--     the same transaction: the counts always equal the committed generations. Rows are
--     only ever inserted by writers (no two commits wait for the same row);
--     compact_search_term_counts() folds each lexeme's rows into one (the janitor).
--   * The ranker (search_lexical_hits, same signature) works in two steps: (1) candidate
--     documents from the chunks of the rarest terms, as many as fit a budget of chunk
--     postings (the AND of all terms, capped, when none fits); (2) for the best of them,
--     a BM25 score over all their chunks with title and heading fields (docs/search.md).
--
-- Expand/contract: new tables, a trigger and replaced functions with unchanged signatures;
-- the previous release's workers write chunks as before (the trigger on document_chunks
-- builds the new vectors) and its search calls the same RPC. Chunks indexed before this
-- migration keep their vectors (no compound lexemes): a compound that no document has is
-- searched as its parts, as before, until `ingest reindex --all` rebuilds them.

-- ---------------------------------------------------------------------------------------
-- Vectors.

-- Stop words of a title or heading (the simple configuration's words the English one
-- drops), with their positions.
create function public.search_stop_words(p_text text)
returns tsvector
language sql
immutable
set search_path = pg_catalog, pg_temp
as $$
    select ts_delete(s.v, array(select w from unnest(tsvector_to_array(s.v)) as w
                                 where to_tsvector('english', w) <> ''::tsvector))
      from (select to_tsvector('simple', p_text) as v) s;
$$;

-- A field's vector: English, with identifiers whole (`_` read as `-`, see the top).
create function public.search_field_vector(p_text text, p_keep_stop_words boolean)
returns tsvector
language sql
immutable
set search_path = pg_catalog, pg_temp
as $$
    select case when p_keep_stop_words then to_tsvector('english', t.text) || public.search_stop_words(t.text)
                else to_tsvector('english', t.text) end
      from (select translate(coalesce(p_text, ''), '_', '-') as text) t;
$$;

create or replace function public.document_chunks_search_vector() returns trigger
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
begin
    new.content_tsv :=
        setweight(public.search_field_vector(new.title, true), 'A')
        || setweight(public.search_field_vector(new.heading, true), 'B')
        || setweight(public.search_field_vector(new.content, false), 'D');
    return new;
end
$$;

-- ---------------------------------------------------------------------------------------
-- Term statistics.

-- Deltas: per collection and lexeme, the searchable documents and chunks that have it;
-- lexeme '' counts the documents and their chunks. The sum of a key's rows is the count.
create table public.search_term_counts (
    collection text not null,
    lexeme text not null,
    documents bigint not null,
    chunks bigint not null
);
create index search_term_counts_lexeme on public.search_term_counts (lexeme, collection) include (documents, chunks);
revoke all on table public.search_term_counts from public;
select public.revoke_from_supabase_roles('table public.search_term_counts');

-- One generation's lexemes: documents 1 (the sign given) and the chunks that have each,
-- and the '' row.
create function public.search_generation_terms(p_document_id uuid, p_generation_id uuid, p_sign integer)
returns table (lexeme text, documents bigint, chunks bigint)
language sql
stable
set search_path = pg_catalog, pg_temp
as $$
    select l.lexeme, p_sign::bigint, p_sign * count(*)
      from public.document_chunks c
     cross join lateral unnest(tsvector_to_array(c.content_tsv)) as l (lexeme)
     where c.document_id = p_document_id and c.index_generation_id = p_generation_id
     group by l.lexeme
    union all
    select '', p_sign::bigint, p_sign * count(*)
      from public.document_chunks c
     where c.document_id = p_document_id and c.index_generation_id = p_generation_id;
$$;

-- A document's searchable generation changed (committed, replaced, deleted, moved): the
-- difference, as delta rows. Runs before DELETE too, while the chunks are still there.
create function public.count_search_terms()
returns trigger
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
declare
    v_old_generation uuid;
    v_new_generation uuid;
begin
    if tg_op in ('UPDATE', 'DELETE') and old.deleted_at is null then
        v_old_generation := old.index_generation_id;
    end if;
    if tg_op in ('INSERT', 'UPDATE') and new.deleted_at is null then
        v_new_generation := new.index_generation_id;
    end if;
    if tg_op = 'UPDATE' and v_old_generation is not distinct from v_new_generation
       and old.collection = new.collection then
        return null;
    end if;
    if v_old_generation is not null then
        insert into public.search_term_counts (collection, lexeme, documents, chunks)
        select old.collection, t.lexeme, t.documents, t.chunks
          from public.search_generation_terms(old.id, v_old_generation, -1) t;
    end if;
    if v_new_generation is not null then
        insert into public.search_term_counts (collection, lexeme, documents, chunks)
        select new.collection, t.lexeme, t.documents, t.chunks
          from public.search_generation_terms(new.id, v_new_generation, 1) t;
    end if;
    return null;
end;
$$;

create trigger documents_count_search_terms
    after insert or update of index_generation_id, deleted_at, collection on public.documents
    for each row execute function public.count_search_terms();
create trigger documents_uncount_search_terms
    before delete on public.documents
    for each row execute function public.count_search_terms();

-- What the counts must sum to: every searchable document's committed generation, counted
-- from its chunks (what the backfill below writes and search_term_count_drift compares).
create function public.search_committed_terms()
returns table (collection text, lexeme text, documents bigint, chunks bigint)
language sql
stable
set search_path = pg_catalog, pg_temp
as $$
    select d.collection, t.lexeme, sum(t.documents)::bigint, sum(t.chunks)::bigint
      from public.documents d
     cross join lateral public.search_generation_terms(d.id, d.index_generation_id, 1) t
     where d.deleted_at is null and d.index_generation_id is not null
     group by d.collection, t.lexeme;
$$;

-- Every searchable document counted once (this migration's transaction holds the rows).
insert into public.search_term_counts (collection, lexeme, documents, chunks)
select t.collection, t.lexeme, t.documents, t.chunks from public.search_committed_terms() t;

-- Folds the delta rows of up to p_limit lexemes (those with the most rows first) into one
-- row each, dropping counts that reached zero. Writers keep appending meanwhile: a row
-- committed after this statement's snapshot is neither read nor deleted here. Returns the
-- rows removed and written.
create function public.compact_search_term_counts(p_limit integer default 10000)
returns jsonb
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
declare
    v_removed bigint;
    v_written bigint;
begin
    if p_limit is null or p_limit < 1 then
        raise exception 'compact_search_term_counts: p_limit must be at least 1' using errcode = '22023';
    end if;
    with picked as (
        select t.collection, t.lexeme
          from public.search_term_counts t
         group by t.collection, t.lexeme
        having count(*) > 1 or sum(t.documents) = 0
         order by count(*) desc
         limit p_limit
    ), removed as (
        delete from public.search_term_counts t
         using picked p
         where t.collection = p.collection and t.lexeme = p.lexeme
        returning t.collection, t.lexeme, t.documents, t.chunks
    ), written as (
        insert into public.search_term_counts (collection, lexeme, documents, chunks)
        select r.collection, r.lexeme, sum(r.documents), sum(r.chunks)
          from removed r
         group by r.collection, r.lexeme
        having sum(r.documents) <> 0 or sum(r.chunks) <> 0
        returning 1
    )
    select (select count(*) from removed), (select count(*) from written) into v_removed, v_written;
    return jsonb_build_object('ok', true, 'removed', v_removed, 'written', v_written);
end;
$$;

-- Where the counts and the committed generations disagree (none, unless a bug or a manual
-- edit): the check behind `tests/` and the soak's checker. It reads every committed chunk.
create function public.search_term_count_drift(p_limit integer default 100)
returns table (collection text, lexeme text, counted_documents bigint, actual_documents bigint,
               counted_chunks bigint, actual_chunks bigint)
language sql
stable
set search_path = pg_catalog, pg_temp
as $$
    with counted as (
        select t.collection, t.lexeme, sum(t.documents) as documents, sum(t.chunks) as chunks
          from public.search_term_counts t
         group by t.collection, t.lexeme
    ), actual as (
        select t.collection, t.lexeme, t.documents, t.chunks from public.search_committed_terms() t
    )
    select coalesce(c.collection, a.collection), coalesce(c.lexeme, a.lexeme),
           coalesce(c.documents, 0), coalesce(a.documents, 0), coalesce(c.chunks, 0), coalesce(a.chunks, 0)
      from counted c
      full join actual a on a.collection = c.collection and a.lexeme = c.lexeme
     where coalesce(c.documents, 0) <> coalesce(a.documents, 0) or coalesce(c.chunks, 0) <> coalesce(a.chunks, 0)
     order by 1, 2
     limit p_limit;
$$;

-- ---------------------------------------------------------------------------------------
-- The query.

-- A query's terms as lexemes: kind 'word' for each word's English lexemes (compound: the
-- lexeme keeps an identifier whole, 'pg-am' of pg_am; the search prefers it to the word's
-- other lexemes when some document has it) or, in a query of stop words only, the words
-- themselves (titles and headings keep theirs); 'phrase'
-- for each "phrase" (query: the tsquery every hit must match; its words are 'word' rows
-- too); 'excluded' for each -word or -"phrase" (query: the tsquery no hit may match).
create type public.search_query_part as (kind text, n integer, lexeme text, compound boolean, query tsquery);
create function public.search_query_lexemes(p_query text)
returns setof public.search_query_part
language sql
immutable
set search_path = pg_catalog, pg_temp
as $$
    with terms as (
        select t.n, t.excluded, t.term like '"%' as phrase,
               translate(pg_catalog.btrim(t.term, '"'), '_', '-') as text
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

-- A lexeme as a tsquery (quoted: taken as it is, never parsed again).
create function public.search_lexeme_query(p_lexeme text)
returns tsquery
language sql
immutable
set search_path = pg_catalog, pg_temp
as $$
    select ('''' || replace(replace(p_lexeme, '\', '\\'), '''', '''''') || '''')::tsquery;
$$;

-- Lexical hits, best first, one per document (docs/search.md, "How lexical search ranks").
-- Statistics come from search_term_counts for the collections searched, never from the
-- planner's. Two steps, each with a bounded cost:
--   1. candidates: the chunks that have the rarest terms, as many terms as fit a budget of
--      1,000 chunk postings (at least 10 x the documents scored; when even the rarest term
--      has more, the chunks that have every term, the first 1,000 of them); each chunk
--      scores the IDF of the terms it has, doubled in the title or headings; the best
--      max(50, p_limit) documents go on;
--   2. each of those documents scores, over every chunk of its committed generation that
--      has a query term: BM25 (k1 1.2, b 0.3; a term's frequency counts its title 5 times,
--      its headings 2 times, its text once; length = chunks) + the IDF of the terms its best
--      chunk has + that of the terms its best chunk's title and headings have + the IDF
--      share of the section heading that is most the query (matched terms / heading words).
-- "Phrases" must be in a hit's chunk; -excluded words or phrases in none of its chunks.
-- Ties: source key, name, id.
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
set client_min_messages = warning
as $$
#variable_conflict use_column
declare
    v_scope text[] := public.search_scope(p_collections);
    v_depth integer := greatest(50, p_limit);
    v_budget integer := greatest(1000, 10 * greatest(50, p_limit));
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
    v_parts public.search_query_part[];
begin
    if p_limit is null or p_limit < 1 or p_limit > 5000 then
        raise exception 'search_lexical_hits: p_limit must be between 1 and 5000' using errcode = '22023';
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
    select websearch_to_tsquery('english', string_agg(t.term, ' or ' order by t.n)) into v_highlight
      from public.search_query_terms(p_query) t where not t.excluded;

    -- 1. Candidate documents.
    with seeds as materialized (
        select c.document_id, c.index_generation_id, c.content_tsv
          from public.document_chunks c
         where c.content_tsv @@ v_seed
           and (v_required is null or c.content_tsv @@ v_required)
           and (v_excluded is null or not c.content_tsv @@ v_excluded)
         limit v_budget
    ), scored as (
        select s.document_id, max(p.score) as score
          from seeds s
          join public.documents d
            on d.id = s.document_id and d.index_generation_id = s.index_generation_id and d.deleted_at is null
         cross join lateral (select ts_filter(s.content_tsv, '{a,b}') as head) h
         cross join lateral (
               select sum(t.idf * case when h.head @@ t.query then 2 else 1 end) as score
                 from unnest(v_queries, v_idf) as t (query, idf)
                where s.content_tsv @@ t.query) p
         where v_scope is null or d.collection = any (v_scope)
         group by s.document_id
    )
    select array_agg(x.document_id) into v_candidates
      from (select s.document_id from scored s order by s.score desc, s.document_id limit v_depth) x;
    if v_candidates is null then
        return;
    end if;

    -- 2. Their scores over all their matching chunks.
    return query
    with terms as (
        select t.lexeme, t.idf from unnest(v_lexemes, v_idf) as t (lexeme, idf)
    ), docs as materialized (
        select d.id, d.collection, d.source_key, d.source_name, coalesce(d.title, d.source_name) as title,
               d.index_generation_id, greatest(d.chunk_count, 1) as chunk_count
          from unnest(v_candidates) as x (id)
          join public.documents d on d.id = x.id
         where v_excluded is null
            or not exists (select 1
                             from (select c.content_tsv from public.document_chunks c
                                    where c.document_id = d.id and c.index_generation_id = d.index_generation_id
                                   offset 0) c
                            where c.content_tsv @@ v_excluded)
    ), chunks as materialized (
        select c.document_id, c.index_generation_id, c.ordinal, c.section_ordinal, c.page_ordinal, c.heading,
               c.content, c.content_tsv
          from docs d
         cross join lateral (  -- by the primary key: offset 0 keeps the planner from making
                               -- this a join that reads every chunk with a query term
               select c.* from public.document_chunks c
                where c.document_id = d.id and c.index_generation_id = d.index_generation_id
               offset 0) c
         where c.content_tsv @@ v_any
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
        select f.document_id,
               sum(t.idf * f.tf * 2.2 / (f.tf + 1.2 * (0.7 + 0.3 * d.chunk_count * v_documents / v_chunks))) as score
          from (select o.document_id, o.lexeme,
                       5 * max(o.in_title) + 2 * sum(o.in_headings) + sum(o.in_text) as tf
                  from occurrences o group by o.document_id, o.lexeme) f
          join terms t using (lexeme)
          join docs d on d.id = f.document_id
         group by f.document_id
    ), chunk_cover as materialized (
        select o.document_id, o.ordinal, sum(t.idf) as covered,
               coalesce(sum(t.idf) filter (where o.in_title > 0 or o.in_headings > 0), 0) as in_head
          from occurrences o join terms t using (lexeme)
         group by o.document_id, o.ordinal
    ), best_chunks as materialized (
        select distinct on (cc.document_id) cc.document_id, cc.ordinal, cc.covered + cc.in_head as cover
          from chunk_cover cc
         order by cc.document_id, cc.covered + cc.in_head desc, cc.ordinal
    ), heading_match as materialized (  -- the section heading the query covers best
        select c.document_id, max(hm.share) as share
          from (select distinct c.document_id, c.index_generation_id, c.section_ordinal from chunks c) c
          join public.document_sections sec
            on sec.document_id = c.document_id and sec.index_generation_id = c.index_generation_id
           and sec.ordinal = c.section_ordinal
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
         order by total desc, d.source_key, d.source_name, d.id
         limit p_limit
    )
    select r.id, r.collection, r.source_key, r.source_name, r.title, r.index_generation_id, c.ordinal,
           c.section_ordinal, c.page_ordinal, sec.heading, c.heading, r.total::float8,
           ts_headline('english', c.content, coalesce(v_highlight, v_any),
                       'MaxFragments=1, MinWords=8, MaxWords=30, StartSel=[, StopSel=]'),
           (row_number() over (order by r.total desc, r.source_key, r.source_name, r.id))::integer
      from ranked r
      join chunks c on c.document_id = r.id and c.ordinal = r.ordinal
      left join public.document_sections sec
             on sec.document_id = r.id and sec.index_generation_id = r.index_generation_id
            and sec.ordinal = c.section_ordinal
     order by 14;
end;
$$;

-- ---------------------------------------------------------------------------------------
-- Privileges: the helpers to no one (the search functions and the trigger run them as the
-- owner), the compaction and the drift check to ingestion_worker (the janitor, the checks).

-- create or replace reset the trigger function to SECURITY INVOKER: owner's rights again.
select public.secure_rpc('public.document_chunks_search_vector()', false);
select public.secure_rpc('public.search_stop_words(text)', false);
select public.secure_rpc('public.search_field_vector(text, boolean)', false);
select public.secure_rpc('public.search_generation_terms(uuid, uuid, integer)', false);
select public.secure_rpc('public.search_committed_terms()', false);
select public.secure_rpc('public.count_search_terms()', false);
select public.secure_rpc('public.search_query_lexemes(text)', false);
select public.secure_rpc('public.search_lexeme_query(text)', false);
select public.secure_rpc('public.compact_search_term_counts(integer)');
select public.secure_rpc('public.search_term_count_drift(integer)');
