-- Search for apps (issue 33; docs/search.md): one search RPC, collections as tenants, and
-- row-level security that scopes every reader to the collections it may read.
--
-- Who reads what:
--   * `collections` names every collection (documents register theirs on insert) and says
--     which are public; `collection_members` makes a user (the uuid Supabase's auth.uid()
--     returns) a reader or writer of one.
--   * anon reads the public collections; authenticated, those and its own; the tables'
--     owner, superusers, BYPASSRLS roles and ingestion_worker read everything, as before.
--     Row-level security says so on `documents`; the documents' names and committed pages,
--     sections and chunks are read through functions that say the same (readable_documents,
--     readable_document_pages, _sections, _chunks: why not RLS on those tables, below).
--   * search_documents(...) is SECURITY INVOKER: every hit it returns is joined to
--     `documents` under the caller's policy.
--   * Readers select only documents.id; what documents hold they read through SECURITY
--     DEFINER functions that check the same rule (below: why).
--
-- Why the candidates come from two SECURITY DEFINER functions: under row-level security
-- PostgreSQL uses an index only for a leakproof operator (a leaky one could see rows the
-- policy hides), and neither `@@` (ts_match_vq) nor pgvector's distance is leakproof, so a
-- reader subject to RLS would scan every chunk. search_lexical_hits and search_vector_hits run
-- as the owner, on the GIN and HNSW indexes, and scope themselves to search_scope(): the
-- same collections the policy allows, for the role that called them. The RPC then joins
-- their rows to `documents` under RLS again, so a bug in one of the two would hide rows,
-- never show them.
--
-- The generic-plan trap: a cached plan of a retrieval statement turns generic after five
-- calls, and a generic plan of the GIN search cannot see the query, so it may scan every
-- chunk. The search functions run with plan_cache_mode = force_custom_plan; the vector path
-- is dynamic SQL (its dimension is part of the index expression), planned at every call.
--
-- Expand/contract: new tables, views, functions and a policy; the previous release reads
-- `documents` as its owner or as ingestion_worker, which the policy lets through.

-- ---------------------------------------------------------------------------------------
-- The roles an app's requests run as (PostgREST, Supabase). Supabase has them; elsewhere
-- they are created here, without login, so the grants below mean the same everywhere.
do $$
begin
    if not exists (select 1 from pg_catalog.pg_roles where rolname = 'anon') then
        create role anon nologin noinherit;
    end if;
    if not exists (select 1 from pg_catalog.pg_roles where rolname = 'authenticated') then
        create role authenticated nologin noinherit;
    end if;
end;
$$;
grant usage on schema public to anon, authenticated;

-- ---------------------------------------------------------------------------------------
-- Collections and their members.

create table public.collections (
    name text primary key check (name <> ''),
    is_public boolean not null default false,
    created_at timestamptz not null default now()
);
create table public.collection_members (
    collection text not null references public.collections (name) on delete cascade,
    user_id uuid not null,
    role text not null default 'reader' check (role in ('reader', 'writer')),
    granted_at timestamptz not null default now(),
    primary key (collection, user_id)
);
create index collection_members_user on public.collection_members (user_id);
revoke all on table public.collections, public.collection_members from public;
grant select on table public.collections, public.collection_members to ingestion_worker;
select public.revoke_from_supabase_roles('table public.collections');
select public.revoke_from_supabase_roles('table public.collection_members');

insert into public.collections (name)
select distinct d.collection from public.documents d
union
select s.collection from public.sync_sources s
on conflict do nothing;

-- Every document's collection is a row of `collections` (private until made public): the
-- enqueue of a document into a new collection names it, whichever release enqueued it.
create function public.register_document_collections()
returns trigger
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
begin
    insert into public.collections (name)
    select distinct n.collection from new_rows n
     where not exists (select 1 from public.collections c where c.name = n.collection)
    on conflict do nothing;
    return null;
end;
$$;
create trigger documents_register_collections
    after insert on public.documents referencing new table as new_rows
    for each statement execute function public.register_document_collections();

-- ---------------------------------------------------------------------------------------
-- Who is asking, and what they may read.

-- The user of this request: auth.uid() where Supabase's `auth` schema has it, else the
-- `sub` of the claims PostgREST sets (request.jwt.claims); null when there is none or it
-- is not a uuid. The claims are trusted as given: PostgREST (or Supabase) verified the JWT.
create function public.request_user_id()
returns uuid
language plpgsql
stable
security definer
set search_path = pg_catalog, pg_temp
set client_min_messages = warning
as $$
declare
    v_sub text;
begin
    -- Never raises: the readers' policy calls this only for rows that got past a reader's
    -- own (leakproof) filter, so an error would tell that such a row exists.
    begin
        if pg_catalog.to_regprocedure('auth.uid()') is not null then
            execute 'select auth.uid()::text' into v_sub;
        else
            v_sub := nullif(pg_catalog.current_setting('request.jwt.claims', true), '')::jsonb ->> 'sub';
        end if;
    exception when others then
        return null;
    end;
    if v_sub ~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' then
        return v_sub::uuid;
    end if;
    return null;
end;
$$;

-- The collections the calling role may read; null: every one (a role row-level security
-- does not restrict here: superuser, BYPASSRLS, the tables' owner or a member of it,
-- ingestion_worker). anon: the public ones; authenticated: those and the ones its user is
-- a member of; any other role: none. The calling role is the one that called into
-- SECURITY DEFINER code (`role`, set by SET ROLE as PostgREST does, else the login role):
-- an owner's function sees it too, so the search functions scope themselves by it.
create function public.readable_collections()
returns text[]
language plpgsql
stable
security definer
set search_path = pg_catalog, pg_temp
set client_min_messages = warning
as $$
declare
    v_caller name := coalesce(nullif(pg_catalog.current_setting('role'), 'none'), session_user);
    v_user uuid;
begin
    if exists (select 1 from pg_catalog.pg_roles r
                where r.rolname = v_caller
                  and (r.rolsuper or r.rolbypassrls
                       or pg_catalog.pg_has_role(v_caller, 'ingestion_worker', 'USAGE')
                       or pg_catalog.pg_has_role(v_caller, (select c.relowner from pg_catalog.pg_class c
                                                             where c.oid = 'public.documents'::regclass),
                                                 'USAGE'))) then
        return null;
    end if;
    if pg_catalog.pg_has_role(v_caller, 'authenticated', 'USAGE') then
        v_user := public.request_user_id();
    elsif not pg_catalog.pg_has_role(v_caller, 'anon', 'USAGE') then
        return '{}';
    end if;
    return array(select c.name from public.collections c where c.is_public
                 union
                 select m.collection from public.collection_members m where m.user_id = v_user
                 order by 1);
end;
$$;

-- What a search may read: the caller's readable collections, narrowed to p_collections when
-- given (null or empty: all it may read); null means every collection.
create function public.search_scope(p_collections text[])
returns text[]
language plpgsql
stable
security definer
set search_path = pg_catalog, pg_temp
set client_min_messages = warning
as $$
declare
    v_readable text[] := public.readable_collections();
begin
    if p_collections is null or cardinality(p_collections) = 0 then
        return v_readable;
    end if;
    if v_readable is null then
        return p_collections;
    end if;
    return array(select unnest(p_collections) intersect select unnest(v_readable));
end;
$$;

-- ---------------------------------------------------------------------------------------
-- What readers see. Row-level security on `documents`: the documents, not deleted, of the
-- collections they may read. Readers may select only its `id` column (what the search RPC
-- joins on): PostgreSQL evaluates a reader's filter before the policy when its operator is
-- leakproof (text `=`, `^@`, …), and EXPLAIN ANALYZE's row counts would then say whether a
-- hidden row matches; with only random ids to filter on, there is nothing to learn. What
-- the documents hold (their names, their pages, sections and chunks) readers read through
-- SECURITY DEFINER functions that check the same rule first (readable_documents,
-- readable_document_pages, _sections, _chunks): a function is opaque to the planner, so no
-- filter of a reader's reaches the rows it did not return.
-- The artifact tables get no row-level security: the workers write them with COPY (the
-- fast path: bench/results/ingest_corpus.md), and PostgreSQL refuses COPY FROM into a table
-- with row-level security for every role it applies to, ingestion_worker included. The
-- owner is not subject to any of it (not forced).

alter table public.documents enable row level security;
create policy documents_readers on public.documents for select to anon, authenticated
    using (deleted_at is null and collection = any (coalesce((select public.readable_collections()), '{}')));
create policy documents_pipeline on public.documents for all to ingestion_worker using (true) with check (true);
grant select (id) on table public.documents to anon, authenticated;

-- Whether the caller may read the document: not deleted, of a collection it may read.
create function public.document_is_readable(p_document_id uuid)
returns boolean
language sql
stable
security definer
set search_path = pg_catalog, pg_temp
set client_min_messages = warning
as $$
    select exists (
        select 1 from public.documents d
          cross join (select public.readable_collections() as names) r
         where d.id = p_document_id and d.deleted_at is null and (r.names is null or d.collection = any (r.names)));
$$;

-- The documents the caller may read, of p_collections when given, by collection and key.
create function public.readable_documents(p_collections text[] default null)
returns table (document_id uuid, collection text, source_uri text, source_name text, title text, status text,
               version integer, page_count integer, section_count integer, chunk_count integer,
               updated_at timestamptz)
language sql
stable
security definer
set search_path = pg_catalog, pg_temp
set client_min_messages = warning
as $$
    select d.id, d.collection, d.source_key, d.source_name, coalesce(d.title, d.source_name), d.status, d.version,
           d.page_count, d.section_count, d.chunk_count, d.updated_at
      from public.documents d
      cross join (select public.search_scope(p_collections) as names) r
     where d.deleted_at is null and (r.names is null or d.collection = any (r.names))
     order by d.collection, d.source_key, d.source_name, d.id;
$$;

-- A readable document's committed pages, sections and chunks (none for any other).
create function public.readable_document_pages(p_document_id uuid)
returns table (ordinal integer, content text)
language sql
stable
security definer
set search_path = pg_catalog, pg_temp
set client_min_messages = warning
as $$
    select p.ordinal, p.content
      from public.documents d
      join public.document_pages p on p.document_id = d.id and p.index_generation_id = d.index_generation_id
     where d.id = p_document_id and public.document_is_readable(p_document_id)
     order by p.ordinal;
$$;

create function public.readable_document_sections(p_document_id uuid)
returns table (ordinal integer, heading text, level integer, page integer, content text)
language sql
stable
security definer
set search_path = pg_catalog, pg_temp
set client_min_messages = warning
as $$
    select s.ordinal, s.heading, s.level, s.page_ordinal + 1, s.content
      from public.documents d
      join public.document_sections s on s.document_id = d.id and s.index_generation_id = d.index_generation_id
     where d.id = p_document_id and public.document_is_readable(p_document_id)
     order by s.ordinal;
$$;

create function public.readable_document_chunks(p_document_id uuid)
returns table (ordinal integer, section_ordinal integer, page integer, heading_path text, content text)
language sql
stable
security definer
set search_path = pg_catalog, pg_temp
set client_min_messages = warning
as $$
    select c.ordinal, c.section_ordinal, c.page_ordinal + 1, c.heading, c.content
      from public.documents d
      join public.document_chunks c on c.document_id = d.id and c.index_generation_id = d.index_generation_id
     where d.id = p_document_id and public.document_is_readable(p_document_id)
     order by c.ordinal;
$$;

-- ---------------------------------------------------------------------------------------
-- The search.

-- A web-search query's terms (PostgreSQL's websearch syntax: words, "quoted phrases" whose
-- closing quote may be missing, -excluded ones, and `or`, which every term is already):
-- each word or phrase once, numbered in order within the included and the excluded ones.
create function public.search_query_terms(p_query text)
returns table (n integer, term text, excluded boolean)
language sql
immutable
set search_path = pg_catalog, pg_temp
as $$
    with tokens as (
        select m.pos, m.parts[1] = '-' as excluded,
               case when m.parts[3] is not null then pg_catalog.btrim(m.parts[3], '-')
                    when pg_catalog.btrim(m.parts[2], E' \t\n\r\f\v') <> ''
                        then '"' || pg_catalog.btrim(m.parts[2], E' \t\n\r\f\v') || '"'
                    else '' end as term
          from pg_catalog.regexp_matches(coalesce(p_query, ''), '(-?)(?:"([^"]*)"?|([^\s"]+))', 'g')
               with ordinality as m (parts, pos)
    )
    select (row_number() over (partition by t.excluded order by min(t.pos)))::integer, t.term, t.excluded
      from tokens t
     where t.term <> '' and pg_catalog.lower(t.term) <> 'or'
     group by t.excluded, t.term
     order by t.excluded, min(t.pos);
$$;

-- Lexical hits: documents ranked by how much of the query their best passage covers, each
-- with its best chunk (docs/search.md, "How lexical search ranks"):
--   term weight   ln(1 + chunks / chunks containing the term): a rare term counts more;
--   field weight  where the chunk has the term: title 1.0, heading path 0.4, text 0.1;
--   chunk share   sum of term weight x field weight over the chunk's terms / sum of weights;
--   window share  the same over two neighbouring chunks (an answer across a section break);
--   score         best chunk share + 0.5 x best window share; ties by ts_rank.
-- Every chunk matching any term is a candidate, so a page missing one word still ranks.
-- Committed generations of documents not deleted, of search_scope(p_collections) only.
create function public.search_lexical_hits(p_query text, p_collections text[], p_limit integer)
returns table (document_id uuid, collection text, source_uri text, source_name text, title text,
               index_generation_id uuid, chunk_ordinal integer, section_ordinal integer, page_ordinal integer,
               heading text, heading_path text, score double precision, snippet text, n integer)
language plpgsql
stable
rows 10  -- p_limit's order (the default, 1000, made the RPC's join to documents a scan of it)
security definer
set search_path = pg_catalog, pg_temp
set plan_cache_mode = force_custom_plan
set client_min_messages = warning
as $$
#variable_conflict use_column
declare
    -- Worked out first, so that each call's plan sees the query as a constant: the planner
    -- estimates how many chunks match it (and so takes the GIN index) only then.
    v_any_term tsquery;
    v_any_excluded tsquery;
    v_scope text[] := public.search_scope(p_collections);
begin
    if p_limit is null or p_limit < 1 or p_limit > 5000 then
        raise exception 'search_lexical_hits: p_limit must be between 1 and 5000' using errcode = '22023';
    end if;
    select websearch_to_tsquery('english', string_agg(t.term, ' or ' order by t.n)) into v_any_term
      from public.search_query_terms(p_query) t where not t.excluded having count(*) > 0;
    select websearch_to_tsquery('english', string_agg(t.term, ' or ' order by t.n)) into v_any_excluded
      from public.search_query_terms(p_query) t where t.excluded having count(*) > 0;
    if v_any_term is null or numnode(v_any_term) = 0 then
        return;  -- only excluded terms, or only stop words: nothing to rank by
    end if;
    if v_any_excluded is not null and numnode(v_any_excluded) = 0 then
        v_any_excluded := null;
    end if;
    return query
with terms as (
    select t.n, q.term
      from public.search_query_terms(p_query) t
     cross join lateral websearch_to_tsquery('english', t.term) as q (term)
     where not t.excluded and numnode(q.term) > 0
),
chunks as (
    select c.document_id, c.index_generation_id, c.ordinal, c.section_ordinal, c.page_ordinal, c.heading,
           c.content, c.content_tsv, ts_rank(c.content_tsv, v_any_term) as rank
      from public.committed_document_chunks c
     where c.content_tsv @@ v_any_term
       and (v_any_excluded is null or not c.content_tsv @@ v_any_excluded)
       and (v_scope is null
            or c.document_id in (select d.id from public.documents d where d.collection = any (v_scope)))
),
hits as (
    select c.document_id, c.ordinal, t.n,
           case when ts_filter(c.content_tsv, '{a}') @@ t.term then 1.0
                when ts_filter(c.content_tsv, '{b}') @@ t.term then 0.4
                else 0.1 end as field
      from chunks c
      join terms t on c.content_tsv @@ t.term
),
index_size as (
    select greatest((select count(*) from chunks),
                    (select reltuples from pg_catalog.pg_class
                      where oid = 'public.document_chunks'::regclass)) as chunks
),
term_weights as (
    select h.n, ln(1 + s.chunks / count(*)) as weight
      from hits h cross join index_size s
     group by h.n, s.chunks
),
chunk_cover as (
    select h.document_id, h.ordinal, sum(w.weight * h.field) as covered
      from hits h join term_weights w using (n)
     group by h.document_id, h.ordinal
),
window_cover as (  -- chunks (start, start + 1), each term at its best field in either
    select x.document_id, max(x.covered) as covered
      from (select p.document_id, p.start, sum(w.weight * p.field) as covered
              from (select h.document_id, s.start, h.n, max(h.field) as field
                      from hits h cross join lateral (values (h.ordinal - 1), (h.ordinal)) as s (start)
                     group by h.document_id, s.start, h.n) p
              join term_weights w using (n)
             group by p.document_id, p.start) x
     group by x.document_id
),
best_chunks as (
    select distinct on (c.document_id)
           c.document_id, c.index_generation_id, c.ordinal, c.section_ordinal, c.page_ordinal, c.heading,
           c.content, cc.covered, c.rank
      from chunks c join chunk_cover cc using (document_id, ordinal)
     order by c.document_id, cc.covered desc, c.rank desc, c.ordinal
),
scored as (
    select b.*, (b.covered + 0.5 * wc.covered) / t.weight as score
      from best_chunks b
      join window_cover wc using (document_id)
     cross join (select sum(weight) as weight from term_weights) t
     order by score desc, b.rank desc, b.document_id
     limit greatest(p_limit, 0)
)
select s.document_id, d.collection, d.source_key, d.source_name, coalesce(d.title, d.source_name),
       s.index_generation_id, s.ordinal, s.section_ordinal, s.page_ordinal, sec.heading, s.heading, s.score::float8,
       ts_headline('english', s.content, v_any_term,
                   'MaxFragments=1, MinWords=8, MaxWords=30, StartSel=[, StopSel=]'),
       (row_number() over (order by s.score desc, s.rank desc, s.document_id))::integer
  from scored s
  join public.documents d on d.id = s.document_id
  left join public.document_sections sec
         on sec.document_id = s.document_id
        and sec.index_generation_id = s.index_generation_id
        and sec.ordinal = s.section_ordinal
 order by 14;
end;

$$;

-- A vector match's snippet: the chunk's first 30 words (there are no matched terms to show).
create function public.search_vector_snippet(p_content text)
returns text
language sql
immutable
set search_path = pg_catalog, pg_temp
as $$
    select case when cardinality(w.words) > 30
                then array_to_string(w.words[1:30], ' ') || ' …'
                else array_to_string(w.words, ' ') end
      from (select regexp_split_to_array(btrim(coalesce(p_content, ''), E' \t\n\r\f\v'), '\s+') as words) w;
$$;

-- Vector hits: the documents whose chunks lie nearest p_embedding by cosine similarity, each
-- with its best chunk (docs/vector-search.md). Where pgvector's column is there: the HNSW
-- index of the vector's dimension, over-fetching 10 chunks per hit asked for and fetching
-- twice as many while long documents crowd out the rest (up to hnsw.max_scan_tuples' 20,000
-- with iterative scans, pgvector 0.8+; ef_search's most, 1,000, before). Else the exact
-- path: cosine similarity of every committed chunk of that dimension, in SQL over real[].
-- Of search_scope(p_collections) only; a zero vector is near nothing.
create function public.search_vector_hits(p_embedding real[], p_collections text[], p_limit integer)
returns table (document_id uuid, collection text, source_uri text, source_name text, title text,
               index_generation_id uuid, chunk_ordinal integer, section_ordinal integer, page_ordinal integer,
               heading text, heading_path text, score double precision, snippet text, n integer)
language plpgsql
stable
rows 10  -- p_limit's order (the default, 1000, made the RPC's join to documents a scan of it)
security definer
set search_path = pg_catalog, pg_temp
set plan_cache_mode = force_custom_plan
set client_min_messages = warning
as $$
#variable_conflict use_column
declare
    v_scope text[] := public.search_scope(p_collections);
    v_dimensions integer := cardinality(p_embedding);
    v_schema name;
    v_iterative boolean;
    v_most integer;
    v_candidates integer;
    v_fetched bigint;
    v_rows jsonb;
    v_statement text;
    v_ef_search text;
    v_iterative_scan text;
begin
    if p_limit is null or p_limit < 1 or p_limit > 5000 then
        raise exception 'search_vector_hits: p_limit must be between 1 and 5000' using errcode = '22023';
    end if;
    if v_dimensions is null or v_dimensions = 0 then
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

    if v_schema is null then
        return query
        with query as (
            select p_embedding::float8[] as v,
                   (select sqrt(sum(x::float8 * x)) from unnest(p_embedding) as x) as norm
        ), scored as (
            select c.document_id, c.index_generation_id, c.ordinal, c.section_ordinal, c.page_ordinal, c.heading,
                   c.content, p.dot / nullif(p.norm * q.norm, 0) as similarity
              from public.committed_document_chunks c
             cross join query q
             cross join lateral (
                   select sum(a * b) as dot, sqrt(sum(a::float8 * a)) as norm
                     from unnest(c.embedding, q.v) as u (a, b)) as p
             where cardinality(c.embedding) = v_dimensions
               and (v_scope is null
                    or c.document_id in (select d.id from public.documents d where d.collection = any (v_scope)))
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
          join public.documents d on d.id = b.document_id
          left join public.document_sections sec
                 on sec.document_id = b.document_id
                and sec.index_generation_id = b.index_generation_id
                and sec.ordinal = b.section_ordinal
         order by b.similarity desc, b.document_id
         limit greatest(p_limit, 0);
        return;
    end if;

    -- pgvector: for this call, resolve `vector` and `<=>` where the extension lives (the
    -- SET clause restores search_path when the function returns; the HNSW settings are
    -- put back below).
    perform pg_catalog.set_config('search_path', 'pg_catalog, ' || quote_ident(v_schema) || ', pg_temp', true);
    v_ef_search := pg_catalog.current_setting('hnsw.ef_search', true);
    v_iterative_scan := pg_catalog.current_setting('hnsw.iterative_scan', true);
    v_most := case when v_iterative then 20000 else 1000 end;
    v_candidates := least(greatest(p_limit, 1) * 10, v_most);
    v_statement := format($q$
        with candidates as materialized (
            select c.document_id, c.index_generation_id, c.ordinal,
                   c.embedding_vector::vector(%1$s) <=> $1::vector(%1$s) as distance
              from public.document_chunks c
             where vector_dims(c.embedding_vector) = %1$s
               and ($3::text[] is null
                    or c.document_id in (select d.id from public.documents d where d.collection = any ($3::text[])))
             order by c.embedding_vector::vector(%1$s) <=> $1::vector(%1$s)
             limit $2
        ), best as (
            select distinct on (k.document_id) k.*, cc.section_ordinal, cc.page_ordinal, cc.heading, cc.content
              from candidates k
              join public.committed_document_chunks cc using (document_id, index_generation_id, ordinal)
             where k.distance <> 'NaN'
             order by k.document_id, k.distance, k.ordinal
        ), hits as (
            select b.document_id, d.collection, d.source_key as source_uri, d.source_name,
                   coalesce(d.title, d.source_name) as title, b.index_generation_id, b.ordinal as chunk_ordinal,
                   b.section_ordinal, b.page_ordinal, sec.heading, b.heading as heading_path,
                   (1 - b.distance)::float8 as score, public.search_vector_snippet(b.content) as snippet
              from best b
              join public.documents d on d.id = b.document_id
              left join public.document_sections sec
                     on sec.document_id = b.document_id
                    and sec.index_generation_id = b.index_generation_id
                    and sec.ordinal = b.section_ordinal
             order by b.distance, b.document_id
             limit $4
        )
        select (select count(*) from candidates),
               coalesce((select jsonb_agg(h order by h.score desc, h.document_id) from hits h), '[]')$q$,
        v_dimensions);
    loop
        perform pg_catalog.set_config('hnsw.ef_search', least(greatest(v_candidates, 40), 1000)::text, true);
        if v_iterative then
            perform pg_catalog.set_config('hnsw.iterative_scan', 'strict_order', true);
        end if;
        execute v_statement into v_fetched, v_rows using p_embedding, v_candidates, v_scope, greatest(p_limit, 0);
        exit when jsonb_array_length(v_rows) >= p_limit or v_fetched < v_candidates or v_candidates >= v_most;
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

-- The search RPC: one hit per document (its best chunk), best first. p_mode `lexical` ranks
-- by query coverage (search_lexical_hits); `vector` by cosine similarity to
-- p_query_embedding, the query's vector from the embedder the documents were indexed with
-- (search_vector_hits); `hybrid` fuses both lists, each 5 x p_limit long, by reciprocal
-- rank (score sum(1 / (60 + rank)); the hit shown is the one of the list that ranked it
-- best, the lexical one on a tie). p_collections narrows the search to those collections
-- (null or empty: every one the caller may read). `heading` is the best chunk's section
-- heading, `heading_path` the headings above it too, `page` its page (1-based; null for a
-- format without pages). SECURITY INVOKER: the caller's row-level security applies to
-- every row returned.
create function public.search_documents(
    p_query text, p_collections text[] default null, p_mode text default 'lexical', p_limit integer default 10,
    p_query_embedding real[] default null)
returns table (document_id uuid, collection text, source_uri text, source_name text, title text, heading text,
               heading_path text, page integer, chunk_ordinal integer, snippet text, score double precision)
language plpgsql
stable
security invoker
set search_path = pg_catalog, pg_temp
set plan_cache_mode = force_custom_plan
set client_min_messages = warning
as $$
#variable_conflict use_column
declare
    v_depth integer;
begin
    if p_mode is null or p_mode not in ('lexical', 'vector', 'hybrid') then
        raise exception 'search_documents: unknown mode %; choose lexical, vector or hybrid', coalesce(p_mode, 'null')
            using errcode = '22023';
    end if;
    if p_limit is null or p_limit < 1 or p_limit > 1000 then
        raise exception 'search_documents: p_limit must be between 1 and 1000, got %', coalesce(p_limit::text, 'null')
            using errcode = '22023';
    end if;
    if p_mode <> 'vector' and coalesce(btrim(p_query), '') = '' then
        raise exception 'search_documents: the search query is empty' using errcode = '22023';
    end if;
    if p_mode <> 'lexical' then
        if p_query_embedding is null or cardinality(p_query_embedding) = 0 then
            raise exception 'search_documents: % search needs p_query_embedding, the query''s vector from the '
                            'embedder the documents were indexed with', p_mode using errcode = '22023';
        end if;
        if exists (select 1 from unnest(p_query_embedding) as x
                    where x is null or x in ('NaN'::real, 'Infinity'::real, '-Infinity'::real)) then
            raise exception 'search_documents: p_query_embedding holds a null, NaN or infinite value'
                using errcode = '22023';
        end if;
    end if;
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
      join public.documents d on d.id = s.document_id  -- the caller's policy, once more
     order by case when p_mode = 'hybrid' then -f.score else f.n end, s.document_id::text
     limit p_limit;
end;
$$;

-- ---------------------------------------------------------------------------------------
-- Collections, for the operator (`ingest collection …`).

-- A collection, created or (p_public given) made public or private. Outcome `created` or
-- `updated` (`unchanged` when it was so already).
create function public.add_collection(p_name text, p_public boolean default null)
returns jsonb
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    v_row public.collections%rowtype;
    v_outcome text;
begin
    if p_name is null or btrim(p_name) = '' then
        raise exception 'add_collection: p_name is required' using errcode = '22023';
    end if;
    insert into public.collections (name, is_public) values (p_name, coalesce(p_public, false))
    on conflict (name) do nothing
    returning * into v_row;
    if v_row.name is not null then
        v_outcome := 'created';
    else
        update public.collections set is_public = coalesce(p_public, is_public)
         where name = p_name and is_public is distinct from coalesce(p_public, is_public)
        returning * into v_row;
        v_outcome := case when v_row.name is null then 'unchanged' else 'updated' end;
        if v_row.name is null then
            select * into v_row from public.collections where name = p_name;
        end if;
    end if;
    return jsonb_build_object('ok', true, 'outcome', v_outcome, 'name', v_row.name, 'is_public', v_row.is_public);
end;
$$;

-- Every collection: whether it is public, its live documents and its members.
create function public.list_collections()
returns table (name text, is_public boolean, documents bigint, members bigint, created_at timestamptz)
language sql
stable
security definer
set search_path = pg_catalog, pg_temp
as $$
    select c.name, c.is_public,
           (select count(*) from public.documents d where d.collection = c.name and d.deleted_at is null),
           (select count(*) from public.collection_members m where m.collection = c.name),
           c.created_at
      from public.collections c
     order by c.name;
$$;

-- A user (auth.uid()'s uuid) made a reader or writer of a collection (its role replaced when
-- it was a member); refused `unknown_collection` when there is no such collection.
create function public.grant_collection(p_collection text, p_user_id uuid, p_role text default 'reader')
returns jsonb
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    v_previous text;
begin
    if p_user_id is null or p_role is null or p_role not in ('reader', 'writer') then
        raise exception 'grant_collection: p_user_id is required and p_role is reader or writer'
            using errcode = '22023';
    end if;
    perform 1 from public.collections where name = p_collection for key share;
    if not found then
        return jsonb_build_object('ok', false, 'reason', 'unknown_collection', 'collection', p_collection);
    end if;
    select role into v_previous from public.collection_members
     where collection = p_collection and user_id = p_user_id for update;
    insert into public.collection_members (collection, user_id, role) values (p_collection, p_user_id, p_role)
    on conflict (collection, user_id) do update set role = excluded.role, granted_at = now();
    return jsonb_build_object('ok', true, 'collection', p_collection, 'user_id', p_user_id, 'role', p_role,
                              'previous_role', v_previous);
end;
$$;

-- A user's membership of a collection removed (`revoked` false: it had none).
create function public.revoke_collection(p_collection text, p_user_id uuid)
returns jsonb
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    v_role text;
begin
    delete from public.collection_members where collection = p_collection and user_id = p_user_id
    returning role into v_role;
    return jsonb_build_object('ok', true, 'collection', p_collection, 'user_id', p_user_id,
                              'revoked', v_role is not null, 'role', v_role);
end;
$$;

-- ---------------------------------------------------------------------------------------
-- Privileges. The operator's calls go to ingestion_worker like the other RPCs; the search
-- to the readers too; the helpers to no one, but readable_collections, which the readers'
-- policies call as them.

select public.secure_rpc('public.add_collection(text, boolean)');
select public.secure_rpc('public.list_collections()');
select public.secure_rpc('public.grant_collection(text, uuid, text)');
select public.secure_rpc('public.revoke_collection(text, uuid)');
select public.secure_rpc('public.search_lexical_hits(text, text[], integer)');
select public.secure_rpc('public.search_vector_hits(real[], text[], integer)');
select public.secure_rpc('public.register_document_collections()', false);
select public.secure_rpc('public.request_user_id()', false);
select public.secure_rpc('public.readable_collections()', false);
select public.secure_rpc('public.search_scope(text[])', false);
select public.secure_rpc('public.search_query_terms(text)', false);
select public.secure_rpc('public.search_vector_snippet(text)', false);
select public.secure_rpc('public.document_is_readable(uuid)', false);
select public.secure_rpc('public.readable_documents(text[])');
select public.secure_rpc('public.readable_document_pages(uuid)');
select public.secure_rpc('public.readable_document_sections(uuid)');
select public.secure_rpc('public.readable_document_chunks(uuid)');
grant execute on function public.readable_collections() to anon, authenticated;
grant execute on function public.readable_documents(text[]) to anon, authenticated;
grant execute on function public.readable_document_pages(uuid) to anon, authenticated;
grant execute on function public.readable_document_sections(uuid) to anon, authenticated;
grant execute on function public.readable_document_chunks(uuid) to anon, authenticated;
grant execute on function public.search_lexical_hits(text, text[], integer) to anon, authenticated;
grant execute on function public.search_vector_hits(real[], text[], integer) to anon, authenticated;

revoke all on function public.search_documents(text, text[], text, integer, real[]) from public;
grant execute on function public.search_documents(text, text[], text, integer, real[])
    to anon, authenticated, ingestion_worker;
