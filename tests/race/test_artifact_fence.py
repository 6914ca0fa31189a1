"""The artifact fence in the database (migration …_lease_tokens.sql).

Before it, only the worker's client checked its lease before writing pages, sections and
chunks: any writer could add rows to any generation. At head a statement-level trigger
refuses (SQLSTATE IF001) rows for a generation that is not `building` under the job's
current claim, for every role. Each test runs before the migration (`token_schema`
not hardened: the defect) and at head (the fix).

The bodies are in artifact_fence_cases.py: tests/race/test_fences_through_pooler.py runs them too.
"""

import pytest

from tests.race import artifact_fence_cases
from tests.race.artifact_fence_cases import WRITERS


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_a_committed_generation_refuses_new_rows(token_schema, new_conn, writer):
    artifact_fence_cases.a_committed_generation_refuses_new_rows(token_schema, new_conn, writer)


def test_a_reclaimed_claim_cannot_write_into_its_own_building_generation(token_schema, new_conn):
    artifact_fence_cases.a_reclaimed_claim_cannot_write_into_its_own_building_generation(token_schema, new_conn)


def test_superseded_and_abandoned_generations_refuse_rows(token_schema, new_conn):
    artifact_fence_cases.superseded_and_abandoned_generations_refuse_rows(token_schema, new_conn)


def test_an_open_artifact_write_holds_off_a_takeover_but_not_the_heartbeat(token_schema, new_conn):
    artifact_fence_cases.an_open_artifact_write_holds_off_a_takeover_but_not_the_heartbeat(token_schema, new_conn)
