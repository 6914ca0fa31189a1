-- The vector search's path and the HNSW index behind it (ingestion_pipeline/search/vector.py,
-- ingestion_pipeline/db/vector_index.py); the search itself is search_vector_hits, in SQL
-- (migration …_search_rpc_and_collections.sql). docs/vector-search.md explains both paths.
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

-- name: hnsw_access_method
-- HNSW came with pgvector 0.5.0.
select exists (select from pg_catalog.pg_am where amname = 'hnsw') as present;

-- name: hnsw_index_state
select i.indisvalid as valid
from pg_catalog.pg_index i
where i.indexrelid = pg_catalog.to_regclass(%(index)s);

-- name: create_hnsw_index
-- Over the committed generations' mean chunk vectors (index_generations.mean_embedding), with
-- inner-product operators: search_vector_ranked scores a document by the query's inner
-- product with its mean (migration 20261206000400), and one insert per committed document
-- costs a drain far less than one per chunk.
create index concurrently if not exists {index} on public.index_generations
using hnsw ((mean_embedding::{vector}({dimensions})) {opclass})
where status = 'committed' and cardinality(mean_embedding) = {dimensions};

-- name: drop_index_concurrently
drop index concurrently if exists {index};

-- name: hnsw_indexes
-- The HNSW indexes of vector search, one per dimension (for `ingest db status`), and those of
-- chunk vectors that releases before migration 20261206000400 built (dropped by
-- `ingest db migrate`): name, table and validity.
select c.relname as name, t.relname as table_name, i.indisvalid as valid
from pg_catalog.pg_index i
join pg_catalog.pg_class c on c.oid = i.indexrelid
join pg_catalog.pg_class t on t.oid = i.indrelid
join pg_catalog.pg_am am on am.oid = c.relam
where i.indrelid in (pg_catalog.to_regclass('public.index_generations'), pg_catalog.to_regclass('public.document_chunks'))
  and am.amname = 'hnsw'
order by 2 desc, 1;
