-- Search scoped before it is budgeted, bounded for every caller, and no table privilege for
-- app roles (issue 44, the fourth review's defects 1, 2, 4 and 6; docs/search.md).
--
-- Before:
--   1. search_lexical_hits took its budget (the first 1,000+ chunk postings) from the GIN
--      index of every collection and every generation, and only then dropped the chunks of
--      other tenants, superseded generations and deleted documents: a private collection
--      with ~1,000 chunks of a word made a reader's own hit for that word vanish, and the
--      p_limit at which it came back told the reader how many such chunks there were. The
--      vector path limited its HNSW candidates before the same filters.
--   2. p_query had no length or term cap, and the highlight's tsquery took every term as
--      written (4,000 case variants of a word: a 7,999-node tsquery, 0.29 s per ts_headline);
--      app roles had no statement_timeout.
--   4. anon and authenticated held SELECT (id) on documents: EXPLAIN ANALYZE's "Rows
--      Removed by Filter" counted every tenant's hidden documents, and the readers' policy's
--      initplan ran only for an id that exists. search_lexical_hits and search_vector_hits
--      were granted to them directly, skipping search_documents' second check.
--   6. readable_documents read every tenant's documents (no index on collection, no paging).
--
-- Now:
--   * searchable_chunks holds, for each live document's committed generation only, its
--     chunks' collection and search vector; a trigger on documents keeps it (the same
--     events that move the term counts: a commit, a new version, a delete, a purge, a move),
--     in the same transaction. Each row's vector holds one more lexeme, its collection's, so
--     its GIN index serves the lexical candidates scoped to the caller's collections in one
--     match, *before* any budget: what a search reads and returns depends only on what the
--     caller may read.
--   * The vector path, for a scope of at most 20,000 committed chunks, is exact and reads
--     only the scope's chunks (searchable_chunks, then chunks by primary key); a larger
--     scope (or an owner's unscoped search) walks the HNSW index with the scope and the
--     committed-generation check applied inside the scan (pgvector's iterative scans).
--   * Queries are capped (22023): at most 4,096 characters and 64 distinct terms (case
--     folded); the highlight is built from the distinct terms. anon and authenticated get a
--     role statement_timeout (3 s and 8 s, Supabase's defaults) where they have none.
--   * search_documents runs as its owner (SECURITY DEFINER) and checks the scope itself
--     once more in its final join; app roles hold no privilege on any table or on the two
--     hit functions. The readers' policy on documents is dropped with the grant it served.
--   * readable_documents pages (p_limit, keyset after a collection, source key and id) on
--     an index of live documents by collection; readable_collections reads the public
--     collections through an index (both indexes: the next file, built concurrently).
--
-- Expand/contract: search_documents, search_lexical_hits and search_vector_hits keep their
-- signatures; readable_documents gains defaulted parameters (a call with one or no argument
-- resolves as before). The previous release reads documents as their owner or as
-- ingestion_worker, whose policy stays.

-- ---------------------------------------------------------------------------------------
-- What a search may read: committed chunks of live documents, with their collection.

-- content_tsv: the chunk's vector plus one lexeme for its collection,
-- search_collection_lexeme(): a search's scope is part of the one tsquery its GIN scan
-- matches, so the planner can never read the index for the words alone and filter the
-- collections afterwards (it did so for a scope its statistics said was most of the table,
-- reading the other collections' rows).
create table public.searchable_chunks (
    collection text not null,
    document_id uuid not null,
    index_generation_id uuid not null,
    ordinal integer not null,
    content_tsv tsvector not null,
    primary key (document_id, index_generation_id, ordinal)
);

-- A collection as a lexeme: a space, which no query term's lexeme has, and a fixed length
-- whatever the name.
create function public.search_collection_lexeme(p_collection text)
returns text
language sql
immutable
set search_path = pg_catalog, pg_temp
as $$
    select 'collection ' || pg_catalog.md5(p_collection);
$$;

-- The scope as a tsquery: any of its collections' lexemes (null: every collection).
create function public.search_scope_query(p_scope text[])
returns tsquery
language sql
immutable
set search_path = pg_catalog, pg_temp
as $$
    select pg_catalog.string_agg(public.search_lexeme_query(public.search_collection_lexeme(c))::text, ' | ')::tsquery
      from unnest(p_scope) as c;
$$;
revoke all on table public.searchable_chunks from public;
grant select on table public.searchable_chunks to ingestion_worker;
select public.revoke_from_supabase_roles('table public.searchable_chunks');

-- A document's searchable generation changed (committed, replaced, deleted, moved): its old
-- generation's rows go, its new one's come, from document_chunks. Runs before DELETE too.
create function public.track_searchable_chunks()
returns trigger
language plpgsql
security definer
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
        delete from public.searchable_chunks s
         where s.document_id = old.id and s.index_generation_id = v_old_generation;
    end if;
    if v_new_generation is not null then
        insert into public.searchable_chunks (collection, document_id, index_generation_id, ordinal, content_tsv)
        select new.collection, c.document_id, c.index_generation_id, c.ordinal,
               c.content_tsv || array_to_tsvector(array[public.search_collection_lexeme(new.collection)])
          from public.document_chunks c
         where c.document_id = new.id and c.index_generation_id = v_new_generation and c.content_tsv is not null;
    end if;
    return null;
end;
$$;

create trigger documents_track_searchable_chunks
    after insert or update of index_generation_id, deleted_at, collection on public.documents
    for each row execute function public.track_searchable_chunks();
create trigger documents_untrack_searchable_chunks
    before delete on public.documents
    for each row execute function public.track_searchable_chunks();

-- Every searchable document's committed chunks (this transaction holds them: the trigger
-- above already sees every commit after it).
insert into public.searchable_chunks (collection, document_id, index_generation_id, ordinal, content_tsv)
select d.collection, c.document_id, c.index_generation_id, c.ordinal,
       c.content_tsv || array_to_tsvector(array[public.search_collection_lexeme(d.collection)])
  from public.documents d
  join public.document_chunks c on c.document_id = d.id and c.index_generation_id = d.index_generation_id
 where d.deleted_at is null and d.index_generation_id is not null and c.content_tsv is not null;

-- Built after the backfill (one pass instead of an insert per row).
create index searchable_chunks_terms on public.searchable_chunks using gin (content_tsv);

-- Where searchable_chunks and the committed generations disagree (none, unless a bug or a
-- manual edit): rows of no committed live generation, and committed chunks with no row.
create function public.searchable_chunks_drift(p_limit integer default 100)
returns table (document_id uuid, index_generation_id uuid, ordinal integer, problem text)
language sql
stable
set search_path = pg_catalog, pg_temp
as $$
    (select s.document_id, s.index_generation_id, s.ordinal, 'not searchable'::text
       from public.searchable_chunks s
       left join public.documents d
              on d.id = s.document_id and d.index_generation_id = s.index_generation_id
             and d.deleted_at is null and d.collection = s.collection
      where d.id is null
      limit p_limit)
    union all
    (select c.document_id, c.index_generation_id, c.ordinal, 'missing'::text
       from public.documents d
       join public.document_chunks c on c.document_id = d.id and c.index_generation_id = d.index_generation_id
       left join public.searchable_chunks s
              on s.document_id = c.document_id and s.index_generation_id = c.index_generation_id
             and s.ordinal = c.ordinal
      where d.deleted_at is null and c.content_tsv is not null and s.document_id is null
      limit p_limit);
$$;

-- ---------------------------------------------------------------------------------------
-- Who reads what: readable collections through an index.

alter function public.readable_collections() set enable_seqscan = off;
alter function public.readable_collections() set enable_bitmapscan = off;

-- ---------------------------------------------------------------------------------------
-- The caps on a query (22023): its length, and its distinct terms (case folded).

create function public.search_query_refusal(p_query text)
returns text
language sql
immutable
set search_path = pg_catalog, pg_temp
as $$
    select case
        when pg_catalog.length(p_query) > 4096
            then format('the search query is %s characters long; at most 4096', pg_catalog.length(p_query))
        when (select count(distinct pg_catalog.lower(t.term)) from public.search_query_terms(p_query) t) > 64
            then 'the search query has more than 64 distinct terms'
    end;
$$;

-- ---------------------------------------------------------------------------------------
-- Lexical hits (docs/search.md, "Lexical search"): as migration bm25_search ranks them, with
-- the candidates of step 1 read from searchable_chunks of the scope only, so the budget is
-- spent on committed chunks of live documents the caller may read; the highlight built from
-- the distinct terms; floating-point sums in a fixed order (the grouping's order follows
-- the planner's estimates, and a float sum's last bit the order it adds in). Rows a call
-- reads depend only on the scope: nested loops into the
-- primary keys (no hash or merge join reads a whole table), no index-only scans (what they
-- read depends on what VACUUM last marked all-visible).
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
        select s.document_id, s.content_tsv
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
    )
    select array_agg(x.document_id) into v_candidates
      from (select s.document_id from scored s order by s.score desc, s.document_id limit v_depth) x;
    perform pg_catalog.set_config('enable_bitmapscan', 'off', true);
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
          from (select distinct c.document_id, c.index_generation_id, c.section_ordinal from chunks c) c
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
      left join lateral (
            select sec.heading from public.document_sections sec
             where sec.document_id = r.id and sec.index_generation_id = r.index_generation_id
               and sec.ordinal = c.section_ordinal
            offset 0) sec on true
     order by 14;
end;
$$;

-- ---------------------------------------------------------------------------------------
-- Vector hits (docs/vector-search.md): the documents whose committed chunks lie nearest
-- p_embedding by cosine similarity, each with its best chunk. A scope of at most 20,000
-- committed chunks is searched exactly, reading only its own chunks (searchable_chunks by
-- collection, then the chunks by primary key): its answer and its cost depend on nothing
-- else. A larger or unscoped search walks the HNSW index of the dimension (pgvector) with
-- the scope and the committed-generation check inside the scan (iterative scans from
-- pgvector 0.8 go on past filtered rows, up to 20,000 tuples), or, without pgvector, computes
-- the cosine of every committed chunk in SQL. A zero vector is near nothing.
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
set enable_seqscan = off  -- the scope's chunks through the indexes, never a scan of all of them
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
    v_exact_at_most constant integer := 20000;
    v_scope_chunks bigint;
    v_schema name;
    v_iterative boolean;
    v_most integer;
    v_candidates integer;
    v_fetched bigint;
    v_rows jsonb;
    v_statement text;
    v_ef_search text;
    v_iterative_scan text;
    v_exact boolean;
    v_source text;
    v_documents uuid[];
    v_generations uuid[];
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
    if v_scope is not null then
        select coalesce(sum(s.chunks), 0) into v_scope_chunks
          from public.search_term_counts s
         where s.lexeme = '' and s.collection = any (v_scope);
    end if;
    select ns.nspname, coalesce(string_to_array(e.extversion, '.')::int[] >= array[0, 8], false)
      into v_schema, v_iterative
      from pg_catalog.pg_attribute a
      join pg_catalog.pg_type t on t.oid = a.atttypid
      join pg_catalog.pg_namespace ns on ns.oid = t.typnamespace
      left join pg_catalog.pg_extension e on e.extname = 'vector'
     where a.attrelid = 'public.document_chunks'::regclass and a.attname = 'embedding_vector'
       and not a.attisdropped;
    v_exact := v_schema is null or coalesce(v_scope_chunks <= v_exact_at_most, false);
    if v_exact then
        -- The scope's committed chunks: a bitmap of the GIN index (this statement only; the
        -- chunks, documents and sections after it by primary key, index scans whatever the
        -- planner's statistics, so what a call reads does not depend on other tenants').
        perform pg_catalog.set_config('enable_bitmapscan', 'on', true);
        select array_agg(k.document_id), array_agg(k.index_generation_id), array_agg(k.ordinal)
          into v_documents, v_generations, v_ordinals
          from public.searchable_chunks k
         where v_scope is null or k.content_tsv @@ public.search_scope_query(v_scope);
        perform pg_catalog.set_config('enable_bitmapscan', 'off', true);
    end if;

    if v_schema is null then
        -- Without pgvector: the cosine in SQL over real[], of the scope's committed chunks
        -- (every committed chunk when unscoped).
        return query
        with query as (
            select p_embedding::float8[] as v,
                   (select sqrt(sum(x::float8 * x)) from unnest(p_embedding) as x) as norm
        ), scored as (
            select c.document_id, c.index_generation_id, c.ordinal, c.section_ordinal, c.page_ordinal, c.heading,
                   c.content, p.dot / nullif(p.norm * q.norm, 0) as similarity
              from unnest(v_documents, v_generations, v_ordinals) as k (document_id, index_generation_id, ordinal)
             cross join lateral (  -- by the primary key
                   select c.* from public.document_chunks c
                    where c.document_id = k.document_id and c.index_generation_id = k.index_generation_id
                      and c.ordinal = k.ordinal
                   offset 0) c
             cross join query q
             cross join lateral (
                   select sum(a * b) as dot, sqrt(sum(a::float8 * a)) as norm
                     from unnest(c.embedding, q.v) as u (a, b)) as p
             where cardinality(c.embedding) = v_dimensions
        ), best as (
            select distinct on (s.document_id) s.*
              from scored s
             where s.similarity is not null
             order by s.document_id, s.similarity desc, s.ordinal
        )
        select b.document_id, d.collection, d.source_key, d.source_name, coalesce(d.title, d.source_name),
               b.index_generation_id, b.ordinal, b.section_ordinal, b.page_ordinal, sec.heading, b.heading,
               b.similarity::float8, public.search_vector_snippet(b.content),
               (row_number() over (order by b.similarity desc, b.document_id))::integer
          from best b
         cross join lateral (select d.* from public.documents d where d.id = b.document_id offset 0) d
          left join lateral (
                select sec.heading from public.document_sections sec
                 where sec.document_id = b.document_id and sec.index_generation_id = b.index_generation_id
                   and sec.ordinal = b.section_ordinal
                offset 0) sec on true
         order by b.similarity desc, b.document_id
         limit greatest(p_limit, 0);
        return;
    end if;

    -- pgvector: for this call, resolve `vector` and `<=>` where the extension lives (the
    -- SET clause restores search_path when the function returns; the HNSW settings are put
    -- back below). A scope of at most v_exact_at_most chunks: every one of its committed
    -- chunks, by primary key. Else the HNSW index, with the scope and the committed
    -- generation checked inside the ordered scan, so rows of other tenants, superseded
    -- generations and deleted documents are skipped by the scan instead of spending its
    -- candidates.
    perform pg_catalog.set_config('search_path', 'pg_catalog, ' || quote_ident(v_schema) || ', pg_temp', true);
    v_ef_search := pg_catalog.current_setting('hnsw.ef_search', true);
    v_iterative_scan := pg_catalog.current_setting('hnsw.iterative_scan', true);
    v_most := case when v_iterative then 20000 else 1000 end;
    v_candidates := least(greatest(p_limit, 1) * 10, v_most);
    if v_exact then
        v_source := $q$
            select c.document_id, c.index_generation_id, c.ordinal,
                   c.embedding_vector::vector(%1$s) <=> $1::vector(%1$s) as distance
              from unnest($5::uuid[], $6::uuid[], $7::integer[]) as k (document_id, index_generation_id, ordinal)
             cross join lateral (
                   select c.* from public.document_chunks c
                    where c.document_id = k.document_id and c.index_generation_id = k.index_generation_id
                      and c.ordinal = k.ordinal
                   offset 0) c
             where vector_dims(c.embedding_vector) = %1$s$q$;
    else
        v_source := $q$
            select c.document_id, c.index_generation_id, c.ordinal,
                   c.embedding_vector::vector(%1$s) <=> $1::vector(%1$s) as distance
              from public.document_chunks c
             where vector_dims(c.embedding_vector) = %1$s
               and exists (select 1 from public.documents d
                            where d.id = c.document_id and d.index_generation_id = c.index_generation_id
                              and d.deleted_at is null and ($3::text[] is null or d.collection = any ($3::text[])))
             order by c.embedding_vector::vector(%1$s) <=> $1::vector(%1$s)
             limit $2$q$;
    end if;
    v_statement := format($q$
        with candidates as materialized (%2$s
        ), best as (
            select distinct on (k.document_id) k.*, cc.section_ordinal, cc.page_ordinal, cc.heading, cc.content
              from candidates k
              join public.document_chunks cc using (document_id, index_generation_id, ordinal)
             where k.distance <> 'NaN'
             order by k.document_id, k.distance, k.ordinal
        ), hits as (
            select b.document_id, d.collection, d.source_key as source_uri, d.source_name,
                   coalesce(d.title, d.source_name) as title, b.index_generation_id, b.ordinal as chunk_ordinal,
                   b.section_ordinal, b.page_ordinal, sec.heading, b.heading as heading_path,
                   (1 - b.distance)::float8 as score, public.search_vector_snippet(b.content) as snippet
              from best b
             cross join lateral (select d.* from public.documents d where d.id = b.document_id offset 0) d
              left join lateral (
                    select sec.heading from public.document_sections sec
                     where sec.document_id = b.document_id and sec.index_generation_id = b.index_generation_id
                       and sec.ordinal = b.section_ordinal
                    offset 0) sec on true
             order by b.distance, b.document_id
             limit $4
        )
        select (select count(*) from candidates),
               coalesce((select jsonb_agg(h order by h.score desc, h.document_id) from hits h), '[]')$q$,
        v_dimensions, format(v_source, v_dimensions));
    loop
        perform pg_catalog.set_config('hnsw.ef_search', least(greatest(v_candidates, 40), 1000)::text, true);
        if v_iterative then
            perform pg_catalog.set_config('hnsw.iterative_scan', 'strict_order', true);
        end if;
        execute v_statement into v_fetched, v_rows
            using p_embedding, v_candidates, v_scope, greatest(p_limit, 0), v_documents, v_generations, v_ordinals;
        exit when v_exact or jsonb_array_length(v_rows) >= p_limit or v_fetched < v_candidates
                  or v_candidates >= v_most;
        v_candidates := least(v_candidates * 2, v_most);
    end loop;
    perform pg_catalog.set_config('hnsw.ef_search', coalesce(v_ef_search, '40'), true);
    if v_iterative then
        perform pg_catalog.set_config('hnsw.iterative_scan', coalesce(v_iterative_scan, 'off'), true);
    end if;
    return query
        select r.document_id, r.collection, r.source_uri, r.source_name, r.title, r.index_generation_id,
               r.chunk_ordinal, r.section_ordinal, r.page_ordinal, r.heading, r.heading_path, r.score, r.snippet,
               e.n::integer
          from jsonb_array_elements(v_rows) with ordinality as e (hit, n)
         cross join lateral jsonb_to_record(e.hit) as r (document_id uuid, collection text, source_uri text,
               source_name text, title text, index_generation_id uuid, chunk_ordinal integer,
               section_ordinal integer, page_ordinal integer, heading text, heading_path text,
               score double precision, snippet text)
         order by e.n;
end;
$$;

-- ---------------------------------------------------------------------------------------
-- The search RPC, as its owner: the scope is the caller's (readable_collections reads the
-- role PostgREST set), checked by the hit functions and once more in the final join.
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
set enable_hashjoin = off
set enable_mergejoin = off
set client_min_messages = warning
as $$
#variable_conflict use_column
declare
    v_depth integer;
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
    return query
    with lists as (
        select 'lexical'::text as list, h.*
          from public.search_lexical_hits(p_query, p_collections, v_depth) h
         where p_mode <> 'vector'
        union all
        select 'vector'::text, h.*
          from public.search_vector_hits(p_query_embedding, p_collections, v_depth) h
         where p_mode <> 'lexical'
    ), fused as (
        select l.document_id, min(l.n) as n,
               case when p_mode = 'hybrid' then sum(1.0::float8 / (60 + l.n)) else max(l.score) end as score
          from lists l
         group by l.document_id
    ), shown as (
        select distinct on (l.document_id) l.*
          from lists l
         order by l.document_id, l.n, l.list
    )
    select s.document_id, s.collection, s.source_uri, s.source_name, s.title,
           s.heading, s.heading_path, s.page_ordinal + 1, s.chunk_ordinal, s.snippet, f.score
      from fused f
      join shown s on s.document_id = f.document_id
     cross join lateral (  -- the scope, once more
           select 1 from public.documents d
            where d.id = s.document_id and d.deleted_at is null and (v_scope is null or d.collection = any (v_scope))
           offset 0) d
     order by case when p_mode = 'hybrid' then -f.score else f.n end, s.document_id::text
     limit p_limit;
end;
$$;

-- ---------------------------------------------------------------------------------------
-- The documents the caller may read, a page at a time, by collection, source key and id
-- (the keyset: the last row's collection, source_uri and document_id), on the index of live
-- documents by collection (next file). Keyless documents sort first within their collection.
-- Replaced by the paged one below: both would make a call with one argument ambiguous.
-- squawk-ignore ban-drop-function
drop function public.readable_documents(text[]);
create function public.readable_documents(
    p_collections text[] default null, p_limit integer default 100, p_after_collection text default null,
    p_after_source_uri text default null, p_after_document_id uuid default null)
returns table (document_id uuid, collection text, source_uri text, source_name text, title text, status text,
               version integer, page_count integer, section_count integer, chunk_count integer,
               updated_at timestamptz)
language plpgsql
stable
security definer
set search_path = pg_catalog, pg_temp
set plan_cache_mode = force_custom_plan
set enable_seqscan = off
set enable_bitmapscan = off
set client_min_messages = warning
as $$
#variable_conflict use_column
declare
    v_scope text[] := public.search_scope(p_collections);
begin
    if p_limit is null or p_limit < 1 or p_limit > 1000 then
        raise exception 'readable_documents: p_limit must be between 1 and 1000' using errcode = '22023';
    end if;
    if v_scope is not null and cardinality(v_scope) = 0 then
        return;
    end if;
    return query
    select d.id, d.collection, d.source_key, d.source_name, coalesce(d.title, d.source_name), d.status, d.version,
           d.page_count, d.section_count, d.chunk_count, d.updated_at
      from public.documents d
     where d.deleted_at is null
       and (v_scope is null or d.collection = any (v_scope))
       and (p_after_collection is null
            or (d.collection, coalesce(d.source_key, ''), d.id)
               > (p_after_collection, coalesce(p_after_source_uri, ''),
                  coalesce(p_after_document_id, '00000000-0000-0000-0000-000000000000'::uuid)))
     order by d.collection, coalesce(d.source_key, ''), d.id
     limit p_limit;
end;
$$;

-- ---------------------------------------------------------------------------------------
-- Privileges. App roles: no table, no policy, no hit function; the search RPC, their
-- readable collections and the readable_* functions only.

drop policy documents_readers on public.documents;
revoke select (id) on table public.documents from anon, authenticated;
revoke all on function public.search_lexical_hits(text, text[], integer) from anon, authenticated;
revoke all on function public.search_vector_hits(real[], text[], integer) from anon, authenticated;

select public.secure_rpc('public.track_searchable_chunks()', false);
select public.secure_rpc('public.searchable_chunks_drift(integer)');
select public.secure_rpc('public.search_query_refusal(text)', false);
select public.secure_rpc('public.search_collection_lexeme(text)', false);
select public.secure_rpc('public.search_scope_query(text[])', false);
select public.secure_rpc('public.readable_documents(text[], integer, text, text, uuid)');
grant execute on function public.readable_documents(text[], integer, text, text, uuid) to anon, authenticated;
grant execute on function public.search_documents(text, text[], text, integer, real[])
    to anon, authenticated, ingestion_worker;

-- A statement timeout for the app roles where they have none (Supabase sets anon 3 s and
-- authenticated 8 s; PostgREST applies a role's settings to each request it runs as it).
-- Roles are the cluster's: a role that already has one keeps it. Without the privilege to
-- alter the roles (CREATEROLE), a notice says so and the migration goes on.
do $$
declare
    v_pair text[];
    v_role text;
    v_timeout text;
begin
    foreach v_pair slice 1 in array array[array['anon', '3s'], array['authenticated', '8s']] loop
        v_role := v_pair[1];
        v_timeout := v_pair[2];
        if not exists (select 1
                         from pg_catalog.pg_db_role_setting s
                         join pg_catalog.pg_roles r on r.oid = s.setrole
                        where r.rolname = v_role and s.setdatabase = 0
                          and exists (select 1 from unnest(s.setconfig) as c where c like 'statement_timeout=%')) then
            begin
                execute format('alter role %I set statement_timeout = %L', v_role, v_timeout);
            exception
                when insufficient_privilege then
                    raise notice 'scoped_search: could not set statement_timeout for role %; set one (alter role % set statement_timeout = ''%'')',
                        v_role, v_role, v_timeout;
                when unique_violation then
                    null;  -- another database of the cluster set it at the same moment (roles are the cluster's)
            end;
        end if;
    end loop;
end;
$$;
