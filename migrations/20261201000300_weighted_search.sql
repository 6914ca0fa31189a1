-- Search that weighs a page's title and headings above its body text.
--
-- Before: content_tsv was generated from the chunk's own text only, so "vacuum" ranked a
-- page that names autovacuum parameters in passing as high as the VACUUM page itself.
-- Each chunk now carries its document's title and its section's heading path, and its
-- vector is  title (weight A) || headings (weight B) || text (weight D);  ts_rank's default
-- weights {D 0.1, C 0.2, B 0.4, A 1.0} then rank a title match ten times a body match.
--
-- Expand only: both new columns are nullable (no table rewrite), and the generated column
-- becomes a plain one set by a trigger. (Changing a generated column's expression would
-- rewrite the table under an exclusive lock; DROP EXPRESSION keeps every stored value and
-- rewrites nothing.) Rows written before this migration keep their unweighted vector until
-- their documents are indexed again (`ingest reindex`); a worker of the previous release
-- leaves both columns empty and gets the body-only vector it always had.

alter table public.document_chunks
    add column title text,
    add column heading text;

-- Clients never write content_tsv (the trigger below sets it on every insert), so no writer
-- of either release depends on the expression being there.
-- squawk-ignore ban-drop-generated-expression
alter table public.document_chunks alter column content_tsv drop expression;

create function public.document_chunks_search_vector() returns trigger
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
begin
    new.content_tsv :=
        setweight(to_tsvector('english', coalesce(new.title, '')), 'A')
        || setweight(to_tsvector('english', coalesce(new.heading, '')), 'B')
        || setweight(to_tsvector('english', new.content), 'D');
    return new;
end
$$;

-- Like every function of ours: owner's rights, pinned search_path, executable by no one
-- (a trigger function runs without an EXECUTE check).
select public.secure_rpc('public.document_chunks_search_vector()', false);

create trigger document_chunks_search_vector
    before insert or update of content, title, heading on public.document_chunks
    for each row execute function public.document_chunks_search_vector();

-- The view froze its column list (c.*) when it was created: list the new columns too.
create or replace view public.committed_document_chunks with (security_invoker = true) as
select c.*
from public.document_chunks c
join public.documents d on d.id = c.document_id and d.index_generation_id = c.index_generation_id
where d.deleted_at is null;
