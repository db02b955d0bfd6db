"""Engines: the communication libraries rankopt orders ranks for, one module each.

Contents
--------
Engine
    The interface (:mod:`rankopt.engines.base`): algorithm choice, probe
    transport, apply, launcher environment.
ENGINES
    ``{"openmpi", "mpich", "gloo", "nccl"}`` -> :class:`Engine`, in
    registration order.
register
    Add an engine to the registry.
get
    The engine of a name (``"mpi"`` detects the MPI library mpi4py loaded).
from_library, from_backend, detect_mpi
    The engine an MPI library version string or a torch.distributed backend
    names; ``"openmpi"`` or ``"mpich"`` from ``MPI.Get_library_version()``.

Every engine answers ``algorithm(collective, nbytes, n, *, env=os.environ,
nodes=None) -> (model_name, params)``: the rankopt model
(:data:`rankopt.models.ALGORITHMS`) whose step order follows what the engine
runs for that call, and ``params`` saying what was decided and from which
source. Each module keeps its rule as a table citing the source file and
version it was read from. Nothing here imports mpi4py or torch (``detect_mpi``
only reads an MPI library already loaded; the probe and apply references are
imported on request).

Adding an engine
----------------
Write one module with a subclass of :class:`Engine` (its attributes and
:meth:`Engine.choose`), and register one instance: a line below for an
engine of rankopt's own, ``rankopt.engines.register(MyEngine())`` for one
of yours. ``tests/test_engine_contract.py`` checks every registered engine
(and ``tests/example_engine.py``, a made-up one) with the same suite.
"""

from __future__ import annotations

import sys

from rankopt._validation import RankoptInputError
from rankopt.engines import gloo, mpich, nccl, openmpi
from rankopt.engines.base import FAMILIES, Engine

__all__ = [
    "Engine",
    "ENGINES",
    "register",
    "get",
    "detect_mpi",
    "from_library",
    "from_backend",
    "names",
]

ENGINES: dict[str, Engine] = {}

#: The MPI engine of a library that no engine's markers name.
DEFAULT_MPI = "openmpi"


def register(engine: Engine, *, replace: bool = False) -> Engine:
    """Add ``engine`` to :data:`ENGINES` under its name, and return it.

    Raises
    ------
    RankoptInputError
        If it is not an :class:`Engine`, its family is unknown, or another
        engine has its name (unless ``replace``).
    """
    if not isinstance(engine, Engine):
        raise RankoptInputError(f"`engine` must be an Engine instance; got {engine!r}.")
    if engine.family not in FAMILIES:
        raise RankoptInputError(
            f"engine {engine.name!r}: `family` must be one of {', '.join(map(repr, FAMILIES))}; "
            f"got {engine.family!r}."
        )
    if engine.name in ENGINES and not replace and ENGINES[engine.name] is not engine:
        raise RankoptInputError(
            f"an engine called {engine.name!r} is registered already ({ENGINES[engine.name]!r})."
        )
    ENGINES[engine.name] = engine
    return engine


register(openmpi.ENGINE)
register(mpich.ENGINE)
register(gloo.ENGINE)
register(nccl.ENGINE)


def names(family: str | None = None) -> tuple[str, ...]:
    """The registered engines' names (of one ``family``: ``"mpi"`` or ``"torch"``)."""
    return tuple(k for k, e in ENGINES.items() if family is None or e.family == family)


def from_library(text: str) -> Engine:
    """The MPI engine a library version string names (:data:`DEFAULT_MPI` if none does).

    The engine with the longest marker in ``text`` wins (:meth:`Engine.marker_in`),
    so an engine registered for a derived library is not shadowed by its parent's.

    Examples
    --------
    >>> from_library("MPICH Version: 4.2.0").name, from_library("Open MPI v5.0.5").name
    ('mpich', 'openmpi')
    """
    best, length = ENGINES[DEFAULT_MPI], 0
    for e in ENGINES.values():  # the most specific marker; on a tie, the later registered
        got = e.marker_in(text) if e.family == "mpi" else 0
        if got and got >= length:
            best, length = e, got
    return best


def from_backend(backend: str) -> Engine | None:
    """The torch engine of a torch.distributed backend name, or None.

    Examples
    --------
    >>> from_backend("nccl").name, from_backend("mpi")
    ('nccl', None)
    """
    for e in ENGINES.values():
        if e.family == "torch" and e.named_by(backend):
            return e
    return None


def detect_mpi() -> str:
    """The MPI library mpi4py has loaded: ``"openmpi"`` or ``"mpich"``.

    Reads ``MPI.Get_library_version()`` only when ``mpi4py.MPI`` is already
    imported (importing it would initialise MPI); ``"openmpi"`` otherwise.
    """
    mod = sys.modules.get("mpi4py.MPI")
    if mod is None:
        return DEFAULT_MPI
    return from_library(str(mod.Get_library_version())).name


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
