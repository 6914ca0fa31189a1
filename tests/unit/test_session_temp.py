"""Pruning of ended sessions' folders (tests/session_temp.py): a folder whose lock is held is
never touched, and of the ended ones the newest are kept for inspection."""

from __future__ import annotations

import os

from tests.session_temp import LOCK_NAME, new_session_folder, prune, try_lock


def test_prune_removes_ended_sessions_but_the_newest_and_never_a_live_one(tmp_path):
    live, live_fd = new_session_folder(tmp_path)
    ended = []
    for age in range(5):
        folder, fd = new_session_folder(tmp_path)
        (folder / "tmp").mkdir()
        os.close(fd)  # its session is over: the lock is free
        os.utime(folder, (1_000_000 - age, 1_000_000 - age))  # ended[0] newest
        ended.append(folder)
    os.utime(live, (1, 1))  # the oldest of all, and still running
    try:
        removed = prune(tmp_path, keep=3)
        assert sorted(removed) == sorted(ended[3:])
        assert all(folder.is_dir() for folder in [live, *ended[:3]])
        assert not any(folder.exists() for folder in ended[3:])
        # The live session's lock is still its own; the kept folders' locks are free again.
        assert try_lock(live / LOCK_NAME) is None
        fd = try_lock(ended[0] / LOCK_NAME)
        assert fd is not None
        os.close(fd)
    finally:
        os.close(live_fd)


def test_a_folder_without_its_lock_file_is_left_alone(tmp_path):
    """A folder another session is removing right now (its lock file gone first or already)."""
    folder, fd = new_session_folder(tmp_path)
    os.close(fd)
    (folder / LOCK_NAME).unlink()
    assert prune(tmp_path, keep=0) == []
    assert folder.is_dir()
