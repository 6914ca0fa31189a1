-- A search hit names its page as the PDF's viewer does (issue 59): a PDF that defines page
-- labels ("i", "ii", "1", "A-3") has them in documents.metadata -> 'page_labels' (one per page,
-- by ordinal; written by the worker since this release), and readable_page_labels gives the
-- label of each (document, page) pair a caller may read, as readable_document_pages gives its
-- pages: nothing of a document the caller may not read (document_is_readable).
--
-- Expand only: a new function; search_documents is unchanged (a hit's `page` stays its number
-- from 1), so callers of the previous release are not affected.

create function public.readable_page_labels(p_document_ids uuid[], p_pages integer[])
returns table (document_id uuid, page integer, page_label text)
language sql
stable
security definer
set search_path = pg_catalog, pg_temp
set client_min_messages = warning
as $$
    select d.id, h.page, d.metadata -> 'page_labels' ->> (h.page - 1)
      from unnest(p_document_ids, p_pages) as h (document_id, page)
     cross join lateral (select d.* from public.documents d where d.id = h.document_id offset 0) d
     where h.page >= 1
       and cardinality(p_document_ids) <= 1000
       and jsonb_typeof(d.metadata -> 'page_labels') = 'array'
       and d.metadata -> 'page_labels' ->> (h.page - 1) <> ''
       and public.document_is_readable(d.id);
$$;

select public.secure_rpc('public.readable_page_labels(uuid[], integer[])');
grant execute on function public.readable_page_labels(uuid[], integer[]) to anon, authenticated;
