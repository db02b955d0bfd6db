"""Engines: which algorithm each communication library runs for a call.

Contents
--------
Engine
    A registry record: name, ``algorithm`` function, granularity, doc.
ENGINES
    ``{"openmpi", "mpich", "gloo", "nccl"}`` -> :class:`Engine`.
get
    The engine of a name (``"mpi"`` detects the MPI library mpi4py loaded).
detect_mpi
    ``"openmpi"`` or ``"mpich"`` from ``MPI.Get_library_version()``.

Every engine answers ``algorithm(collective, nbytes, n, *, env=os.environ,
nodes=None) -> (model_name, params)``: the rankopt model
(:data:`rankopt.models.ALGORITHMS`) whose step order follows what the engine
runs for that call, and ``params`` saying what was decided and from which
source. Each module keeps its rule as a table citing the source file and
version it was read from. Nothing here imports mpi4py or torch (``detect_mpi``
only reads an MPI library already loaded).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rankopt._validation import RankoptInputError
from rankopt.engines import gloo, mpich, nccl, openmpi

__all__ = ["Engine", "ENGINES", "get", "detect_mpi"]


@dataclass(frozen=True)
class Engine:
    """One engine: its name, its algorithm choice and the granularity it orders at."""

    name: str
    choose: Callable[..., tuple[str, dict[str, Any]]]
    granularity: str
    doc: str

    def algorithm(
        self,
        collective: str,
        nbytes: float,
        n: int,
        *,
        env: Mapping[str, str] | None = None,
        nodes: Sequence[Any] | None = None,
    ) -> tuple[str, dict[str, Any]]:
        """The rankopt model of what this engine runs, and what decided it."""
        return self.choose(
            collective, nbytes, n, env=os.environ if env is None else env, nodes=nodes
        )


ENGINES: dict[str, Engine] = {
    "openmpi": Engine("openmpi", openmpi.algorithm, "rank", "Open MPI 5.0.x (coll/tuned, han)"),
    "mpich": Engine("mpich", mpich.algorithm, "rank", "MPICH 4.x default selection"),
    "gloo": Engine("gloo", gloo.algorithm, "rank", "Gloo as torch 2.x ProcessGroupGloo uses it"),
    "nccl": Engine("nccl", nccl.algorithm, "node", "NCCL ring/tree tuning model (simplified)"),
}


def detect_mpi() -> str:
    """The MPI library mpi4py has loaded: ``"openmpi"`` or ``"mpich"``.

    Reads ``MPI.Get_library_version()`` only when ``mpi4py.MPI`` is already
    imported (importing it would initialise MPI); ``"openmpi"`` otherwise.
    """
    mod = sys.modules.get("mpi4py.MPI")
    if mod is None:
        return "openmpi"
    text = str(mod.Get_library_version()).lower()
    return "mpich" if ("mpich" in text or "mvapich" in text) else "openmpi"


def get(name: str | Engine) -> Engine:
    """The engine called ``name`` (``"mpi"``: :func:`detect_mpi`).

    Examples
    --------
    >>> get("openmpi").algorithm("allreduce", 1 << 20, 8, env={})[0]
    'rabenseifner_ompi'
    """
    if isinstance(name, Engine):
        return name
    key = str(name).strip().lower()
    if key == "mpi":
        key = detect_mpi()
    if key not in ENGINES:
        raise RankoptInputError(
            f"`engine` must be one of {', '.join(map(repr, ENGINES))} or 'mpi'; "
            f"got {name!r} instead."
        )
    return ENGINES[key]
