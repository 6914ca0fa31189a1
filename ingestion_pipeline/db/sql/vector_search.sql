-- Vector search (ingestion_pipeline/search/vector.py) and the HNSW index behind it
-- (ingestion_pipeline/db/vector_index.py); docs/vector-search.md explains both paths.
-- `{dimensions}` is formatted in as a literal (psycopg.sql): a cast's type modifier cannot
-- be a parameter, and the planner matches an index only against the same expression and
-- predicate, constants included.

-- name: vector_column
-- The pgvector path exists when migration pgvector added document_chunks.embedding_vector;
-- the schema of its type is where the extension lives (public, or Supabase's `extensions`).
select n.nspname as extension_schema, e.extversion as extension_version
from pg_catalog.pg_attribute a
join pg_catalog.pg_type t on t.oid = a.atttypid
join pg_catalog.pg_namespace n on n.oid = t.typnamespace
left join pg_catalog.pg_extension e on e.extname = 'vector'
where a.attrelid = pg_catalog.to_regclass('public.document_chunks')
  and a.attname = 'embedding_vector' and not a.attisdropped;

-- name: use_extension_schema
-- For this transaction only: resolve `vector`, `<=>` and vector_dims where they live.
select pg_catalog.set_config('search_path',
                             pg_catalog.current_setting('search_path') || ', ' || pg_catalog.quote_ident(%(schema)s),
                             true);

-- name: hnsw_settings
-- For this transaction only. ef_search: the candidate list the graph walk keeps, as long as
-- the over-fetch (pgvector's maximum is 1000). iterative_scan (pgvector 0.8+): keep walking
-- past ef_search, in distance order, until the over-fetch is met.
select pg_catalog.set_config('hnsw.ef_search', %(ef_search)s, true),
       pg_catalog.set_config('hnsw.iterative_scan', 'strict_order', true);

-- name: hnsw_ef_search
select pg_catalog.set_config('hnsw.ef_search', %(ef_search)s, true);

-- name: nearest_documents_pgvector
-- The `candidates` nearest chunks of this dimension by cosine distance (the HNSW index:
-- the plain table, so that nothing but the index's own order and LIMIT is asked of it);
-- then those of committed generations (the view), each document's best chunk, best first.
-- `fetched` says how many candidates there were (one row with null hits when none is
-- committed): fewer than asked means every chunk was seen.
with candidates as materialized (
    select c.document_id, c.index_generation_id, c.ordinal,
           c.embedding_vector::vector({dimensions}) <=> %(query)s::vector({dimensions}) as distance
    from document_chunks c
    where vector_dims(c.embedding_vector) = {dimensions}
    order by c.embedding_vector::vector({dimensions}) <=> %(query)s::vector({dimensions})
    limit %(candidates)s
), best as (
    select distinct on (k.document_id) k.*, cc.section_ordinal, cc.content
    from candidates k
    join committed_document_chunks cc using (document_id, index_generation_id, ordinal)
    where k.distance <> 'NaN'  -- a zero vector has no direction: it is near nothing
      and (%(collections)s::text[] is null
           or exists (select 1 from documents d
                      where d.id = k.document_id and d.collection = any (%(collections)s::text[])))
    order by k.document_id, k.distance, k.ordinal
)
select f.fetched, h.*
from (select count(*) as fetched from candidates) as f
left join lateral (
    select b.document_id,
           coalesce(d.title, d.source_name) as title,
           d.source_name,
           d.source_key as source_uri,
       d.collection,
           s.heading,
           b.ordinal as chunk_ordinal,
           1 - b.distance as score,
           b.content
    from best b
    join documents d on d.id = b.document_id
    left join document_sections s
           on s.document_id = b.document_id
          and s.index_generation_id = b.index_generation_id
          and s.ordinal = b.section_ordinal
    order by b.distance, b.document_id
    limit %(limit)s
) as h on true
order by h.score desc, h.document_id;

-- name: nearest_documents_exact
-- Every committed chunk with a vector of this dimension, scored by cosine similarity in
-- SQL over real[] (no extension needed); each document's best chunk, best first.
with query as (
    select q.v, (select sqrt(sum(x * x)) from unnest(q.v) as x) as norm
    from (select %(query)s::float8[] as v) as q
), scored as (
    select c.document_id, c.index_generation_id, c.ordinal, c.section_ordinal, c.content,
           p.dot / nullif(p.norm * q.norm, 0) as similarity
    from committed_document_chunks c
    cross join query q
    cross join lateral (
        select sum(a * b) as dot, sqrt(sum(a::float8 * a)) as norm
        from unnest(c.embedding, q.v) as t(a, b)
    ) as p
    where cardinality(c.embedding) = %(dimensions)s
      and (%(collections)s::text[] is null
           or exists (select 1 from documents d
                      where d.id = c.document_id and d.collection = any (%(collections)s::text[])))
), best as (
    select distinct on (document_id) *
    from scored
    where similarity is not null  -- a zero vector has no direction: it is near nothing
    order by document_id, similarity desc, ordinal
)
select b.document_id,
       coalesce(d.title, d.source_name) as title,
       d.source_name,
       d.source_key as source_uri,
       d.collection,
       s.heading,
       b.ordinal as chunk_ordinal,
       b.similarity as score,
       b.content
from best b
join documents d on d.id = b.document_id
left join document_sections s
       on s.document_id = b.document_id
      and s.index_generation_id = b.index_generation_id
      and s.ordinal = b.section_ordinal
order by b.similarity desc, b.document_id
limit %(limit)s;

-- name: hnsw_access_method
-- HNSW came with pgvector 0.5.0.
select exists (select from pg_catalog.pg_am where amname = 'hnsw') as present;

-- name: hnsw_index_state
select i.indisvalid as valid
from pg_catalog.pg_index i
where i.indexrelid = pg_catalog.to_regclass(%(index)s);

-- name: create_hnsw_index
create index concurrently if not exists {index} on public.document_chunks
using hnsw ((embedding_vector::{vector}({dimensions})) {opclass})
where {vector_dims}(embedding_vector) = {dimensions};

-- name: drop_index_concurrently
drop index concurrently if exists {index};

-- name: hnsw_indexes
-- The HNSW indexes of chunk vectors, one per dimension (for `ingest db status`).
select c.relname as name, i.indisvalid as valid
from pg_catalog.pg_index i
join pg_catalog.pg_class c on c.oid = i.indexrelid
join pg_catalog.pg_am am on am.oid = c.relam
where i.indrelid = pg_catalog.to_regclass('public.document_chunks') and am.amname = 'hnsw'
order by 1;
