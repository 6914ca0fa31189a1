-- Lexical search over committed generations (readers see no build in progress, no deleted
-- document). Loaded by name through ingestion_pipeline.db.queries.query().

-- name: search_lexical
-- Pages ranked by how much of the query they cover, with their best chunk.
-- A term (word or phrase) counts by how rare it is in the index (inverse chunk frequency),
-- so covering "password" outweighs covering "file". A page's score is the share of the
-- query's weight it covers anywhere (its chunks together), then the share its best chunk
-- covers alone, then that chunk's ts_rank, where a term in the title (weight A) or a
-- heading (B) counts far above the same term in the text (D).
-- Parameters: included (text[], one websearch term each), any_included and any_excluded
-- (the terms joined with "or"), limit.
with query as (
    select websearch_to_tsquery('english', %(any_included)s) as any_term,
           websearch_to_tsquery('english', %(any_excluded)s) as any_excluded
),
terms as (
    select t.n, q.term
    from unnest(%(included)s::text[]) with ordinality as t (text, n)
    cross join lateral websearch_to_tsquery('english', t.text) as q (term)
    where numnode(q.term) > 0
),
chunks as (
    select c.document_id, c.index_generation_id, c.ordinal, c.section_ordinal, c.content,
           c.content_tsv, ts_rank(c.content_tsv, q.any_term) as rank
    from query q
    join committed_document_chunks c on c.content_tsv @@ q.any_term
    where numnode(q.any_excluded) = 0 or not c.content_tsv @@ q.any_excluded
),
hits as (
    select c.document_id, c.ordinal, t.n
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
    select h.document_id, h.ordinal, sum(w.weight) as covered
    from hits h join term_weights w using (n)
    group by h.document_id, h.ordinal
),
document_cover as (
    select d.document_id, sum(w.weight) as covered
    from (select distinct document_id, n from hits) d join term_weights w using (n)
    group by d.document_id
),
best_chunks as (
    select distinct on (c.document_id)
           c.document_id, c.index_generation_id, c.ordinal, c.section_ordinal, c.content, cc.covered, c.rank
    from chunks c join chunk_cover cc using (document_id, ordinal)
    order by c.document_id, cc.covered desc, c.rank desc, c.ordinal
),
scored as (
    select b.*, dc.covered / t.weight as document_share, b.covered / t.weight as chunk_share,
           b.rank / nullif(max(b.rank) over (), 0) as relative_rank
    from best_chunks b
    join document_cover dc using (document_id)
    cross join (select sum(weight) as weight from term_weights) t
)
select s.document_id,
       coalesce(d.title, d.source_name) as title,
       d.source_name,
       sec.heading,
       s.ordinal as chunk_ordinal,
       (s.document_share + 0.5 * s.chunk_share + 0.25 * coalesce(s.relative_rank, 0))::float8 as score,
       ts_headline('english', s.content, q.any_term,
                   'MaxFragments=1, MinWords=8, MaxWords=30, StartSel=[, StopSel=]') as snippet
from scored s
cross join query q
join documents d on d.id = s.document_id
left join document_sections sec
       on sec.document_id = s.document_id
      and sec.index_generation_id = s.index_generation_id
      and sec.ordinal = s.section_ordinal
order by score desc, s.document_id
limit %(limit)s;
