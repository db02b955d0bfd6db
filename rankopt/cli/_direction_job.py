"""The ring-direction trial as a job of its own: what ``rankopt run-mpi`` launches.

``rankopt run-mpi --network`` solves before any process of the program exists, so
it cannot time the two ways round inside the program's job as ``python -m
rankopt.mpi`` does. It runs this module under the program's own launcher and
launcher options (the same placement), with this Python and mpi4py::

    mpiexec -n 8 python -m rankopt.cli._direction_job trial.json verdict.json

``trial.json`` holds ``{"order", "trial", "timeout"}`` (the order found, the plan of
:func:`rankopt.adapters.direction.plan`, seconds any step may take); launch rank 0
writes ``{"alternative_wins", "line"}`` to ``verdict.json`` (atomically), after
:func:`rankopt.adapters.mpi.time_directions` timed both orders with the MPI
collective itself.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["main", "read_spec"]


def read_spec(path: str | Path) -> dict[str, Any]:
    """The trial file: ``{"order", "trial", "timeout"}``, checked."""
    from rankopt._files import parse_json, read_text_file
    from rankopt._validation import RankoptInputError

    spec = parse_json(read_text_file(path, "trial file"), f"trial file '{path}'")
    keys = ("order", "trial", "timeout")
    if not isinstance(spec, dict) or any(k not in spec for k in keys):
        raise RankoptInputError(
            f"trial file '{path}' must be a JSON object with keys {', '.join(keys)}."
        )
    plan = spec["trial"]
    need = ("alternative", "collective", "nbytes")
    if not isinstance(plan, dict) or any(k not in plan for k in need):
        raise RankoptInputError(
            f"trial file '{path}': `trial` must hold {', '.join(need)}; got {plan!r}."
        )
    return spec


def main(argv: Sequence[str] | None = None) -> int:
    """Run the trial on every rank of ``MPI_COMM_WORLD``; rank 0 writes the verdict."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2:
        print("usage: python -m rankopt.cli._direction_job TRIAL.json OUT.json", file=sys.stderr)
        return 2
    spec = read_spec(args[0])
    from mpi4py import MPI

    from rankopt._files import atomic_write_text
    from rankopt.adapters.mpi import time_directions

    comm = MPI.COMM_WORLD
    wins, line = time_directions(comm, spec["order"], spec["trial"], float(spec["timeout"]))
    if comm.Get_rank() == 0:
        verdict = {"alternative_wins": bool(wins), "line": line}
        atomic_write_text(args[1], json.dumps(verdict) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
