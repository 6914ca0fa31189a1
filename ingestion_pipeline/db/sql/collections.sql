-- Collections and their members (db/rpc/collections.py; the RPCs are in
-- migrations/…_search_rpc_and_collections.sql): the operator's `ingest collection …`.
-- Named notation; parameters are server-side bound.

-- name: rpc_add_collection
select add_collection(p_name => %(name)s, p_public => %(public)s) as result;

-- name: rpc_list_collections
-- Every collection, by name: whether it is public, its live documents and its members.
select name, is_public, documents, members, created_at from list_collections();

-- name: rpc_grant_collection
select grant_collection(p_collection => %(collection)s, p_user_id => %(user_id)s, p_role => %(role)s) as result;

-- name: rpc_revoke_collection
select revoke_collection(p_collection => %(collection)s, p_user_id => %(user_id)s) as result;

-- name: rpc_known_collections
-- Which of these names are collections (the operator's commands refuse the others).
select name from public.collections where name = any (%(names)s::text[]);

-- name: collection_names
-- Every collection's name: what an unknown name is compared with (errors.near_names).
select name from public.collections order by name;

-- name: rpc_remove_collection
select remove_collection(p_name => %(name)s) as result;

-- name: live_documents_of_collection
-- A page of the live documents of a collection, by id (documents_live_by_collection).
select id from public.documents
 where collection = %(collection)s and deleted_at is null and id > %(after)s
 order by id limit %(limit)s;
