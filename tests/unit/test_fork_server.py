"""A parsing child started as its pool ends exits quietly (ingestion_pipeline/worker/fork_server.py).

The interleaving is forced, not waited for: the script unlinks the lock's semaphore before
the child is started, which is what the end of the pool (or of the worker) does to a child
that is still being started. The child then fails as it unpickles the lock, every time."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent(
    """
    import multiprocessing
    import sys
    import _multiprocessing
    from multiprocessing import resource_tracker, synchronize

    def child(lock):
        pass

    if __name__ == "__main__":
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(sys.argv[1:])
        synchronize.SemLock._cleanup = staticmethod(lambda name: None)  # unlinked below, by hand
        lock = context.Lock()
        name = lock._semlock.name
        _multiprocessing.sem_unlink(name)  # the pool gone while its new child starts
        resource_tracker.unregister(name, "semaphore")
        process = context.Process(target=child, args=(lock,))
        process.start()
        process.join()
        print(process.exitcode)
    """
)


def run(tmp_path, source: str, *arguments: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "start_a_child.py"
    script.write_text(source)
    return subprocess.run(
        [sys.executable, str(script), *arguments], capture_output=True, text=True, timeout=60, check=True
    )


@pytest.mark.parametrize("preload", [[], ["ingestion_pipeline.worker.fork_server"]], ids=["plain", "fork_server"])
def test_a_child_whose_pool_is_gone_exits_1_and_only_the_plain_fork_server_prints_a_traceback(tmp_path, preload):
    result = run(tmp_path, SCRIPT, *preload)
    assert result.stdout.strip() == "1"  # the child failed before running anything, either way
    if preload:
        assert result.stderr == ""
    else:  # what a worker's stderr showed before the module
        assert "Traceback" in result.stderr and "FileNotFoundError" in result.stderr, result.stderr


def test_any_other_failure_of_a_child_still_prints(tmp_path):
    """The hook keeps quiet only about the missing semaphore: a child that fails otherwise as
    it unpickles what it was sent (here a division by zero) still shows why."""
    failing = textwrap.dedent(
        """
        import multiprocessing
        import operator

        class FailsInTheChild:
            def __reduce__(self):
                return (operator.truediv, (1, 0))

        if __name__ == "__main__":
            context = multiprocessing.get_context("forkserver")
            context.set_forkserver_preload(["ingestion_pipeline.worker.fork_server"])
            process = context.Process(target=print, args=(FailsInTheChild(),))
            process.start()
            process.join()
            print(process.exitcode)
        """
    )
    result = run(tmp_path, failing)
    assert result.stdout.strip() == "1"
    assert "Traceback" in result.stderr and "ZeroDivisionError" in result.stderr, result.stderr
