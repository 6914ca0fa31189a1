"""Every refusal reason the head schema's functions answer with is a `Refusal` member, and
each member is one the schema (or an earlier migration still in the window) answers with:
the enum and the plpgsql cannot drift apart. Results keep a reason they do not know as
text (a newer schema's), and known reasons become members."""

import re
from pathlib import Path

from ingestion_pipeline.db.models import JobOutcome, Refusal

MIGRATIONS = Path(__file__).resolve().parents[2] / "migrations"
# 'reason', 'x' in jsonb_build_object(...), and the CASE that decides a retry's reasons.
LITERAL = re.compile(r"'reason',\s*'([a-z_]+)'")
CASE_ARM = re.compile(r"then '([a-z_]+)'")


def reasons_in(text: str) -> set[str]:
    found = set(LITERAL.findall(text))
    for case in re.findall(r"case when j\.status = 'completed'.*?end as reason", text, flags=re.S):
        found |= set(CASE_ARM.findall(case))
    return found


def test_every_reason_of_the_head_schema_is_a_refusal():
    head = reasons_in((MIGRATIONS / "schema.sql").read_text())
    assert head, "no reason found in schema.sql: the pattern no longer matches the functions"
    assert head - {r.value for r in Refusal} == set()


def test_every_refusal_is_answered_by_some_migration():
    answered = set()
    for path in MIGRATIONS.glob("*.sql"):
        answered |= reasons_in(path.read_text())
    assert {r.value for r in Refusal} - answered == set()


def test_a_known_reason_becomes_a_member_and_an_unknown_one_stays_text():
    known = JobOutcome.model_validate({"ok": False, "reason": "lease_lost"})
    assert known.reason is Refusal.LEASE_LOST and known.lease_lost
    unknown = JobOutcome.model_validate({"ok": False, "reason": "a_reason_of_the_next_release"})
    assert unknown.reason == "a_reason_of_the_next_release" and not isinstance(unknown.reason, Refusal)
    assert JobOutcome.model_validate({"ok": True}).reason is None
