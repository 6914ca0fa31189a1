"""docs/configuration.md documents every field of `Settings`, and nothing else under a
setting's name: the variables, defaults and bounds of its table are checked against
`Settings.model_fields` and the settings' config (env prefix, aliases), so the page cannot
drift from settings.py."""

from __future__ import annotations

import re
import types
from pathlib import Path
from typing import Any, Union, get_args, get_origin

import annotated_types
import pytest
from pydantic import AliasChoices
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from ingestion_pipeline.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
CONFIGURATION = ROOT / "docs" / "configuration.md"
# Pages that name settings in prose: a name there must still be a setting.
PROSE = [ROOT / "README.md", ROOT / "migrations" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# Variables documented beside the settings that are read by other code, with where.
READ_ELSEWHERE = {"DAGSTER_PG_URL": "orchestration/instance.py: Dagster's own storage"}

NAME = re.compile(r"`([A-Z][A-Z0-9_]*)`")
SETTING_NAME = re.compile(r"\bINGEST_[A-Z0-9_]+\b")


def env_names(name: str, field: FieldInfo) -> set[str]:
    """The variables pydantic-settings reads for a field: its alias choices when it has
    them, else the env prefix and the field's name."""
    alias = field.validation_alias or field.alias
    if isinstance(alias, AliasChoices):
        return {choice for choice in alias.choices if isinstance(choice, str)}
    if isinstance(alias, str):
        return {alias}
    return {f"{Settings.model_config.get('env_prefix', '')}{name}".upper()}


def table_rows() -> dict[str, list[str]]:
    """The rows of the page's tables that document variables, keyed by each name in their
    first cell (a row may name a setting and its alias)."""
    rows: dict[str, list[str]] = {}
    for line in CONFIGURATION.read_text().splitlines():
        if not line.startswith("| `"):
            continue
        cells = [cell.strip() for cell in line.strip().strip("|").split(" | ")]
        assert len(cells) == 4, f"docs/configuration.md: a row needs 4 cells (no '|' inside one): {line}"
        names = NAME.findall(cells[0])
        assert names, f"docs/configuration.md: a row's first cell names no variable: {line}"
        for name in names:
            assert name not in rows, f"docs/configuration.md documents {name} twice"
            rows[name] = cells
    return rows


def base_type(annotation: Any) -> Any:
    """`int | None` is documented as an int."""
    if get_origin(annotation) in (Union, types.UnionType):
        [annotation] = [arg for arg in get_args(annotation) if arg is not type(None)]
    return annotation


def number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def bounds(field: FieldInfo) -> str:
    """The field's bounds as the page writes them: `1–1000`, `≥ 0`, `> 0, ≤ 86400`."""
    low = high = None
    for item in field.metadata:
        if isinstance(item, annotated_types.Ge):
            low = f"≥ {number(item.ge)}"
        elif isinstance(item, annotated_types.Gt):
            low = f"> {number(item.gt)}"
        elif isinstance(item, annotated_types.Le):
            high = f"≤ {number(item.le)}"
        elif isinstance(item, annotated_types.Lt):
            high = f"< {number(item.lt)}"
    if low and high and low.startswith("≥") and high.startswith("≤"):
        return f"{low[2:]}–{high[2:]}"
    return ", ".join(part for part in (low, high) if part)


def choices(field: FieldInfo) -> list[str]:
    """The values a `^(a|b|c)$` pattern allows."""
    for item in field.metadata:
        pattern = getattr(item, "pattern", None)
        if pattern and (match := re.fullmatch(r"\^\((.+)\)\$", pattern)):
            return match[1].split("|")
    return []


def mentions(cell: str, text: str) -> bool:
    """`text` in the cell as a whole number or word (`30` is not in `300`)."""
    return re.search(rf"(?<![\w.]){re.escape(text)}(?![\w.])", cell) is not None


FIELDS = sorted(Settings.model_fields.items())


def test_every_setting_is_documented_and_nothing_else():
    documented = set(table_rows())
    settings = {env for name, field in FIELDS for env in env_names(name, field)}

    missing = sorted(settings - documented)
    unknown = sorted(documented - settings - set(READ_ELSEWHERE))
    assert not missing and not unknown, (
        f"docs/configuration.md: settings missing: {missing}; variables that are not settings: {unknown}"
    )


@pytest.mark.parametrize(("name", "field"), FIELDS, ids=[name for name, _ in FIELDS])
def test_default_and_bounds_match_settings(name, field):
    rows = table_rows()
    envs = sorted(env_names(name, field))
    documented = {id(rows[env]) for env in envs if env in rows}
    assert len(documented) == 1, f"{envs}: document them in one row of docs/configuration.md"
    _, default, accepts, meaning = rows[envs[0]]
    assert default and meaning, f"{envs[0]}: the default and the meaning must be filled in"

    if field.default_factory is None and field.default is not PydanticUndefined:
        value = field.default
        if value is None:
            expected = "unset"
        elif isinstance(value, str):
            expected = f"`{value}`"
        else:
            expected = number(value)
        assert mentions(default, expected), f"{envs[0]}: settings.py's default is {value!r}; the page says {default!r}"

    kind = base_type(field.annotation)
    if kind in (int, float):
        word = "integer" if kind is int else "number"
        assert accepts == f"{word} {bounds(field)}".strip(), f"{envs[0]}: settings.py accepts {word} {bounds(field)}"
    for choice in choices(field):
        assert f"`{choice}`" in accepts, f"{envs[0]}: settings.py accepts {choice!r}; the page does not say so"


def test_pages_name_only_settings_that_exist():
    settings = {env for name, field in FIELDS for env in env_names(name, field)}
    stale = {
        (page.relative_to(ROOT).as_posix(), found)
        for page in PROSE
        if page.exists()
        for found in SETTING_NAME.findall(page.read_text())
        if not found.endswith("_") and found not in settings  # `INGEST_OPENAI_*` names a family
    }
    assert not stale, f"pages name settings that do not exist: {sorted(stale)}"
