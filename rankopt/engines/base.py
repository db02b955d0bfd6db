"""The interface every engine implements: one class, one instance in the registry.

An engine is a communication library as rankopt sees it. It answers four
questions, one attribute or method each:

==================  ========================================================
algorithm choice    :meth:`Engine.algorithm`: the rankopt model of what the
                    library runs for one call (a rule table per collective in
                    :attr:`Engine.collectives`, cited in :attr:`Engine.source`)
probe transport     :meth:`Engine.transport`: the probe module that measures
                    the network over the library's own processes
                    (:attr:`Engine.probe_module`)
apply               :meth:`Engine.applier`: the function that applies an order
                    (:attr:`Engine.apply_function`), at
                    :attr:`Engine.granularity`
launcher env        :attr:`Engine.launch_vars` (rank and size variables its
                    launcher exports), :attr:`Engine.family` and
                    :attr:`Engine.markers` (how an entry point recognises it)
==================  ========================================================

The probe and apply references are dotted names, imported only when asked
for, so that importing an engine never imports mpi4py or torch.
"""

from __future__ import annotations

import abc
import importlib
import os
from collections.abc import Callable, Mapping, Sequence
from types import ModuleType
from typing import Any, ClassVar

from rankopt.engines._common import FALLBACK, check_call, node_sizes

__all__ = [
    "Engine",
    "MPIEngine",
    "TorchEngine",
    "Env",
    "Nodes",
    "Choice",
    "FAMILIES",
    "UNTABULATED_SOURCE",
]

#: The environment an engine reads its settings from.
Env = Mapping[str, str]
#: One node label per rank, or None when the layout is unknown.
Nodes = Sequence[Any] | None
#: ``(rankopt model, params)``: what :meth:`Engine.algorithm` answers.
Choice = tuple[str, dict[str, Any]]

#: ``family`` -> what names an engine of it (the ``markers``): the MPI
#: library's version string (``MPI_Get_library_version``), or the
#: torch.distributed backend name.
FAMILIES = {"mpi": "library version", "torch": "backend name"}

#: ``params["source"]`` of a collective an engine has no rule for.
UNTABULATED_SOURCE = "rankopt default"


class Engine(abc.ABC):
    """One communication library: algorithm choice, probe, apply and launcher environment.

    A subclass sets the class attributes below and implements
    :meth:`choose`; one instance of it goes into the registry
    (:func:`rankopt.engines.register`).

    Attributes
    ----------
    name : str
        Registry key (``--engine NAME``).
    doc : str
        One line: the library and version the rules were read from.
    source : str
        The source file(s) and version the rule tables cite; ``params
        ["source"]`` of every tabulated call names it (or a more precise one).
    collectives : tuple of str
        The collectives :meth:`choose` has a rule for; the others get the
        rankopt default (:data:`rankopt.engines._common.FALLBACK`), marked
        ``rule="untabulated"``.
    granularity : str
        What an order permutes: ``"rank"``, or ``"node"`` where the library
        keeps a node's ranks together (NCCL).
    family : str
        ``"mpi"`` or ``"torch"`` (:data:`FAMILIES`): which entry points run
        it (``python -m rankopt.mpi`` or ``rankopt run --backend``).
    markers : tuple of str
        What names it within its family: lower-case substrings of the MPI
        library version, or the torch.distributed backend names.
    probe_module : str
        The probe module measuring over it (its ``measure`` function).
    apply_function : str
        ``"module:function"`` applying an order in a running job.
    launch_vars : tuple of (str, str)
        The rank and size variables its launcher exports to every process
        (what :func:`rankopt.adapters._env.detect` reads).
    local_vars : tuple of (str, str) or None
        The variables of the process's index on its host and of the number
        of processes there, when its launcher exports them.
    job_vars : tuple of str
        Variables that identify one launch, first present wins (keeps the
        rendezvous keys of restarts apart).
    """

    name: ClassVar[str]
    doc: ClassVar[str]
    source: ClassVar[str]
    collectives: ClassVar[tuple[str, ...]]
    granularity: ClassVar[str] = "rank"
    family: ClassVar[str]
    markers: ClassVar[tuple[str, ...]]
    probe_module: ClassVar[str]
    apply_function: ClassVar[str]
    launch_vars: ClassVar[tuple[str, str]]
    local_vars: ClassVar[tuple[str, str] | None] = None
    job_vars: ClassVar[tuple[str, ...]] = ()

    @abc.abstractmethod
    def choose(self, collective: str, nbytes: float, n: int, *, env: Env, nodes: Nodes) -> Choice:
        """The model and what decided it, for a validated call of a tabulated collective.

        ``params`` needs ``engine_algorithm`` (the library's own name, or
        None), ``rule`` and ``source``; ``engine`` is added by
        :meth:`algorithm`. Subclasses may take keyword-only options more
        (``itemsize``).
        """

    def algorithm(
        self,
        collective: str,
        nbytes: float,
        n: int,
        *,
        env: Env | None = None,
        nodes: Nodes = None,
        **options: Any,
    ) -> Choice:
        """The rankopt model of what this engine runs for one call, and what decided it.

        Parameters
        ----------
        collective : str
            A rankopt collective (:data:`rankopt.models.ALGORITHMS`).
        nbytes : float
            The call's size as rankopt counts it
            (:func:`rankopt.models.schedule.schedule`).
        n : int
            Communicator size (at least 2).
        env : mapping, optional
            Where the library's settings are read (default ``os.environ``).
        nodes : sequence, optional
            Node label of each rank.
        **options
            The engine's own (``itemsize`` for the MPI engines).

        Returns
        -------
        (str, dict)
            The model name (in ``ALGORITHMS[collective]``) and ``params``:
            ``engine``, ``engine_algorithm``, ``rule``, ``source`` and what
            else the engine decided on.
        """
        size, n = check_call(collective, nbytes, n)
        node_sizes(nodes, n)  # one label per rank, whether or not the rule reads them
        head: dict[str, Any] = {"engine": self.name}
        if self.granularity != "rank":
            head["granularity"] = self.granularity
        if collective not in self.collectives:
            head.update(engine_algorithm=None, rule="untabulated", source=UNTABULATED_SOURCE)
            return FALLBACK[collective], head
        model, params = self.choose(
            collective, size, n, env=os.environ if env is None else env, nodes=nodes, **options
        )
        return model, {**head, **params}

    def transport(self) -> ModuleType:
        """The probe module (imported now; it imports its library only to measure)."""
        return importlib.import_module(self.probe_module)

    def applier(self) -> Callable[..., Any]:
        """The function that applies an order (imported now, lazily like the probe)."""
        module, _, attr = self.apply_function.partition(":")
        fn: Callable[..., Any] = getattr(importlib.import_module(module), attr)
        return fn

    def launch_env(self, rank: int, size: int) -> dict[str, str]:
        """The rank and size variables this engine's launcher gives process ``rank``."""
        rank_var, size_var = self.launch_vars
        return {rank_var: str(rank), size_var: str(size)}

    def launched(self, env: Env) -> bool:
        """Whether ``env`` holds this engine's launcher variables."""
        return all(k in env for k in self.launch_vars)

    def named_by(self, text: str) -> bool:
        """Whether ``text`` (library version or backend name) names this engine."""
        return self.marker_in(text) > 0

    def marker_in(self, text: str) -> int:
        """Length of the longest of its markers that ``text`` holds (0: none).

        The longest match names an engine most specifically: an engine for a
        derived library (marker ``"mvapich2"``) wins over its parent's
        (``"mpich"``) on the derived library's version string.
        """
        low = str(text).strip().lower()
        if self.family == "torch":
            return len(low) if low in self.markers else 0
        return max((len(m) for m in self.markers if m in low), default=0)

    def __repr__(self) -> str:
        return f"<engine {self.name!r}: {self.doc}>"


class MPIEngine(Engine):
    """An MPI library: probed and reordered through mpi4py, named by its version string."""

    family = "mpi"
    probe_module = "rankopt.probe.mpi"
    apply_function = "rankopt.adapters.mpi:reorder"


class TorchEngine(Engine):
    """A torch.distributed backend: probed over a Gloo group, ranks set before init.

    The launcher (``rankopt run``) probes over a temporary Gloo group
    whatever the backend, and gives the program its new ``RANK``.
    """

    family = "torch"
    probe_module = "rankopt.probe.torch"
    apply_function = "rankopt.adapters.torch:ordered_group"
    launch_vars = ("RANK", "WORLD_SIZE")
