-- The search before issue 21 (ingestion_pipeline/db/sql/queries.sql, search_chunks, at d7a77f6),
-- kept verbatim for bench/relevance.py's "before" column: chunks, not documents, ranked by
-- ts_rank_cd over the unweighted content_tsv, every word of the query required.
-- name: search_chunks
-- Committed generations only (the view), best first.
select c.document_id,
       coalesce(d.title, d.source_name) as title,
       d.source_name,
       s.heading,
       c.ordinal as chunk_ordinal,
       ts_rank_cd(c.content_tsv, q.query) as rank,
       ts_headline('english', c.content, q.query,
                   'MaxFragments=1, MinWords=8, MaxWords=30, StartSel=[, StopSel=]') as snippet
from websearch_to_tsquery('english', %(query)s) as q(query)
join committed_document_chunks c on c.content_tsv @@ q.query
join documents d on d.id = c.document_id
left join document_sections s
       on s.document_id = c.document_id
      and s.index_generation_id = c.index_generation_id
      and s.ordinal = c.section_ordinal
order by rank desc, c.document_id, c.ordinal
limit %(limit)s;
