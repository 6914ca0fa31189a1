"""The parsing children never run the caller's main module (worker/child_start.py): a script
without a `__main__` guard runs once, whatever children it starts, and an embedder defined in
the caller's main module stays in the job's thread (a child could not unpickle it)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import types
from collections.abc import Iterator

import pytest

from ingestion_pipeline.worker.child_start import ParseContext
from ingestion_pipeline.worker.isolation import can_run_in_child

UNGUARDED = textwrap.dedent(
    """
    import os
    from ingestion_pipeline.worker.child_start import parse_context

    print("top level ran")
    context = parse_context(["ingestion_pipeline.worker.fork_server"])
    children = [context.Process(target=os.getpid) for _ in range(2)]
    for child in children:
        child.start()
    for child in children:
        child.join()
    print("exit codes", [child.exitcode for child in children])
    """
)


def test_a_script_without_a_main_guard_runs_once_whatever_children_it_starts(tmp_path):
    script = tmp_path / "unguarded.py"
    script.write_text(UNGUARDED)
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, check=True)
    assert result.stdout.splitlines() == ["top level ran", "exit codes [0, 0]"], result.stderr


def test_the_fork_server_never_preloads_the_main_module():
    with pytest.raises(ValueError, match="main module"):
        ParseContext(["__main__", "ingestion_pipeline.worker.fork_server"])


class Local:
    """An embedder's stand-in, importable by name."""


@pytest.fixture
def class_in_main() -> Iterator[type]:
    """A class defined in `__main__`, as a script's own embedder is."""
    main = sys.modules["__main__"]
    defined = types.new_class("ScriptEmbedder")
    defined.__module__ = "__main__"
    main.ScriptEmbedder = defined  # type: ignore[attr-defined]
    try:
        yield defined
    finally:
        del main.ScriptEmbedder  # type: ignore[attr-defined]


def test_an_embedder_defined_in_the_main_module_stays_in_the_jobs_thread(class_in_main):
    assert can_run_in_child(Local())  # type: ignore[arg-type]
    assert not can_run_in_child(class_in_main())
    holder = Local()
    holder.model = class_in_main()  # type: ignore[attr-defined]  # nested: found as well
    assert not can_run_in_child(holder)  # type: ignore[arg-type]
