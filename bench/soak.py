"""The soak, as `bench/soak.py --minutes N` (what the issues name): the fault harness's long
run, tests/faults/soak.py, in a process of its own from the repository root. It lives with
the harness because it is a fault test, not a speed measurement, and bench/ imports only the
installed package; every argument is passed on (`--minutes`, `--no-sync`, `--migrate-to`, …).

  .venv/bin/python bench/soak.py --minutes 10
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

if __name__ == "__main__":
    sys.exit(subprocess.call([sys.executable, "-m", "tests.faults.soak", *sys.argv[1:]], cwd=ROOT))
