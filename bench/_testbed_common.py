"""What the testbed experiment scripts share: the ``rankopt`` CLI as a subprocess.

Each script builds its own testbed (``testbed up``), runs the user's commands
inside it (``testbed exec``) and always takes it down again (``testbed down``).
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from collections.abc import Sequence


def rankopt(*args: str, timeout: int = 3600) -> str:
    """``python -m rankopt ARGS``; its standard output, or exit with its tail on failure."""
    cmd = [sys.executable, "-m", "rankopt", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise SystemExit(f"failed: {shlex.join(cmd)}\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    return proc.stdout


def testbed_exec(
    prefix: str,
    hosts: str,
    seed: int,
    cmd: Sequence[str],
    *,
    engine: str | None = None,
    timeout: int = 900,
) -> str:
    """``cmd`` under the launcher of the testbed ``prefix``, one process per host."""
    argv = ["testbed", "exec", "--attach", "--prefix", prefix, "--hosts", hosts]
    argv += ["--seed", str(seed), *(["--engine", engine] if engine else [])]
    return rankopt(*argv, "--", *cmd, timeout=timeout)


def testbed_down(prefix: str) -> None:
    """Take the testbed ``prefix`` down (never raises: it runs in ``finally`` blocks)."""
    subprocess.run(
        [sys.executable, "-m", "rankopt", "testbed", "down", "--prefix", prefix], check=False
    )
