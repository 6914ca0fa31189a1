"""Fencing tokens and the lease deadline on the row (migration …_lease_tokens.sql).

Each test runs twice (`token_schema`): just before the lease-token migration, where it
observes the defect, and at head, where it observes the fix. The worker's own client is
used with `lease_token=` the claim returned: before the migration the claim returns no
token (None) and the client falls back on the worker-id fence, which is the defect.

The bodies are in lease_token_cases.py: tests/race/test_fences_through_pooler.py runs them too.
"""

from tests.race import lease_token_cases


def test_a_stalled_thread_of_a_reused_worker_id_is_fenced_by_its_token(token_schema, new_conn):
    lease_token_cases.a_stalled_thread_of_a_reused_worker_id_is_fenced_by_its_token(token_schema, new_conn)


def test_an_operator_retry_does_not_reset_the_token(token_schema, new_conn):
    lease_token_cases.an_operator_retry_does_not_reset_the_token(token_schema, new_conn)


def test_a_final_attempt_is_never_dead_lettered_between_commit_and_complete(token_schema, new_conn):
    lease_token_cases.a_final_attempt_is_never_dead_lettered_between_commit_and_complete(token_schema, new_conn)


def test_a_shorter_stale_window_does_not_take_a_live_lease(token_schema, new_conn):
    lease_token_cases.a_shorter_stale_window_does_not_take_a_live_lease(token_schema, new_conn)


def test_commit_refuses_a_generation_the_claim_did_not_begin(token_schema, new_conn):
    lease_token_cases.commit_refuses_a_generation_the_claim_did_not_begin(token_schema, new_conn)
