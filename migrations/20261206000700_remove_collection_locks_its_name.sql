-- Removing a collection waits only for enqueues into that collection (issue 58, the fifth
-- review's defect 6).
--
-- Before (migration 20261205000400): remove_collection took `LOCK documents IN SHARE MODE` to
-- wait for documents being enqueued while it counted: with one enqueue open in collection `a`,
-- removing the empty collection `typo` queued behind it, every enqueue into any other
-- collection queued behind the removal, and after the removal's 5 s lock_timeout both had
-- waited for nothing (55P03).
--
-- Now an enqueue's statement that writes documents takes a shared transaction-level advisory
-- lock on each collection it writes into (register_document_collections, the trigger that
-- already registers them), and the removal an exclusive one on the name it removes, before
-- anything else: it waits for the open enqueues into that collection only, and they for it.
-- The key is the name's 64-bit hash in the namespace of collections; a collision only makes
-- one removal wait for an unrelated enqueue. Advisory transaction locks end with the
-- transaction, so they hold through a transaction-mode pooler.
--
-- Expand/contract: same signatures and results.

create function public.collection_lock_key(p_name text)
returns bigint
language sql
immutable
security definer
set search_path = pg_catalog, pg_temp
as $$
    select pg_catalog.hashtextextended('ingest.collection:' || p_name, 0);
$$;

create or replace function public.register_document_collections()
returns trigger
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
begin
    -- Shared: enqueues into one collection do not wait for each other, a removal of it waits
    -- for them to end (and they for it), in the names' order so two statements cannot cross.
    perform pg_catalog.pg_advisory_xact_lock_shared(public.collection_lock_key(c.collection))
       from (select distinct n.collection from new_rows n order by n.collection) c;
    insert into public.collections (name)
    select distinct n.collection from new_rows n
     where not exists (select 1 from public.collections c where c.name = n.collection)
    on conflict do nothing;
    return null;
end;
$$;

create or replace function public.remove_collection(p_name text)
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
    -- Every enqueue into this collection that is open has ended once this is granted, and none
    -- writes into it until this transaction ends: the count below sees them all.
    perform pg_catalog.pg_advisory_xact_lock(public.collection_lock_key(p_name));
    perform 1 from public.collections where name = p_name for update;
    if not found then
        return jsonb_build_object('ok', false, 'reason', 'unknown_collection', 'collection', p_name);
    end if;
    select array_agg(s.name order by s.name) into v_sources from public.sync_sources s where s.collection = p_name;
    if v_sources is not null then
        return jsonb_build_object('ok', false, 'reason', 'has_sources', 'collection', p_name, 'sources', v_sources);
    end if;
    select count(*) into v_documents from public.documents d where d.collection = p_name and d.deleted_at is null;
    if v_documents > 0 then
        return jsonb_build_object('ok', false, 'reason', 'not_empty', 'collection', p_name, 'documents', v_documents);
    end if;
    select count(*) into v_members from public.collection_members m where m.collection = p_name;
    delete from public.collections where name = p_name;
    return jsonb_build_object('ok', true, 'collection', p_name, 'members', v_members);
end;
$$;

select public.secure_rpc('public.collection_lock_key(text)', false);
