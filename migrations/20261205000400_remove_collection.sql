-- `ingest collection remove NAME` (issue 48, "no silent typos"): a collection created by a
-- typo (`ingest enqueue --collection pricnig`) can be taken away again.
--
-- remove_collection(p_name) removes an empty collection: its row and, by the foreign key's
-- cascade, its members. It refuses, changing nothing:
--   unknown_collection  no collection of that name;
--   has_sources         a registered source syncs into it (its next sync would create it
--                       again): `sources` names them;
--   not_empty           it has live documents (`documents` counts them); the operator deletes
--                       them first through delete_document (`--delete-documents`).
-- Deleted documents keep their collection's name (their rows are history, not members);
-- search_term_counts and searchable_chunks hold no live row of an empty collection.
--
-- A document enqueued while the collection is removed must not end in a collection that has
-- no row (registered by the trigger register_document_collections only when the row is
-- missing): the count of live documents is taken under a SHARE lock on `documents`, which
-- waits for the inserts in flight (their documents are then counted) and holds new ones until
-- the removal commits (their trigger then finds no row and registers the collection again).
-- The lock is held for one count by an index (documents_collection_key_c) and one delete,
-- and waited for at most lock_timeout (55P03: the operator runs it again). Lock order: the
-- collection's row, then the table; no other function locks a collection row and then waits
-- on documents (grant_collection locks the row only).

create function public.remove_collection(p_name text)
returns jsonb
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
set lock_timeout = '5s'
as $$
declare
    v_sources text[];
    v_documents bigint;
    v_members bigint;
begin
    perform 1 from public.collections where name = p_name for update;
    if not found then
        return jsonb_build_object('ok', false, 'reason', 'unknown_collection', 'collection', p_name);
    end if;
    select array_agg(s.name order by s.name) into v_sources from public.sync_sources s where s.collection = p_name;
    if v_sources is not null then
        return jsonb_build_object('ok', false, 'reason', 'has_sources', 'collection', p_name, 'sources', v_sources);
    end if;
    lock table public.documents in share mode;
    select count(*) into v_documents from public.documents d where d.collection = p_name and d.deleted_at is null;
    if v_documents > 0 then
        return jsonb_build_object('ok', false, 'reason', 'not_empty', 'collection', p_name, 'documents', v_documents);
    end if;
    select count(*) into v_members from public.collection_members m where m.collection = p_name;
    delete from public.collections where name = p_name;
    return jsonb_build_object('ok', true, 'collection', p_name, 'members', v_members);
end;
$$;

select public.secure_rpc('public.remove_collection(text)');
