"""MPICH 4.x / 5.0: its default collective selection and the CVARs that change it.

Contents
--------
MPICH, ENGINE, algorithm
    The engine (:class:`rankopt.engines.base.Engine`);
    ``algorithm(collective, nbytes, n, *, env, nodes, itemsize=8)``: the
    rankopt model of what MPICH runs, with MPICH's own name in ``params``.
auto
    MPICH's default (``auto``) choice for a flat communicator, by name.
MODELS, CVARS, ALLREDUCE_ALGORITHMS
    MPICH algorithm -> rankopt model per collective; the CVAR that forces
    one (``MPIR_CVAR_<COLL>_INTRA_ALGORITHM``).

Where the rules come from
-------------------------
Since MPICH 4.0 the default selection is a JSON decision tree compiled into
libmpi (``src/mpi/coll/coll_selection.json`` in MPICH 5.0,
``maint/tuning/coll/mpir/generic.json`` in 4.x; read here from the
``mpich`` 5.0.2 wheel's ``libmpi.so.12``), walked by
``src/mpi/coll/src/csel.c``. The CH4 device picks a *composition* first
(its own table, ``maint/tuning/coll/ch4/generic.json`` in 4.x): on a
communicator whose every rank is on a node of its own (``nodes`` unknown, or
all distinct -- the testbed, where each rank has a host) the flat
composition calls the MPIR table; the CVARs of MPICH 3.x
(``MPIR_CVAR_ALLREDUCE_SHORT_MSG_SIZE``, ...) are no longer read by it. In
the table, ``avg_msg_size`` is ``count * type size`` (alltoall: the block to
each peer), ``total_msg_size`` the whole gathered or scattered vector, and
``pow2`` the largest power of two ``<= n``. rankopt assumes a built-in,
commutative op (``MPI_SUM``), no ``MPI_IN_PLACE`` alltoall, and counts
elements of ``itemsize`` bytes (default 8).

==============  ========================================================
allreduce       recursive doubling when ``avg_msg_size <= 8`` or
                ``count < pow2``, else reduce_scatter_allgather
allgather       ``n`` a power of two: recursive doubling below 512 KiB
                total, else ring; other ``n``: Bruck below 80 KiB, else ring
reduce_scatter  (``MPI_Reduce_scatter_block``) recursive halving below
                512 KiB total, else pairwise
broadcast       ``n < 8``: binomial; ``n`` a power of two: binomial up to
                12 KiB, scatter + recursive-doubling allgather up to
                512 KiB, else scatter + ring allgather; other ``n``:
                binomial up to 12 KiB, else scatter + ring allgather
reduce          binomial up to 2 KiB or when ``count < pow2``, else
                reduce_scatter_gather
alltoall        ``n <= 8``: scattered up to 32 KiB per peer, else
                pairwise; otherwise Bruck up to 256 B, scattered up to
                32 KiB, else pairwise (the table says ``n < 8``; 8 ranks
                measured scattered)
==============  ========================================================

A forced algorithm (``MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM`` and the like;
``auto`` keeps the table) that MPICH cannot apply to a call falls back to
the table (``MPII_COLLECTIVE_FALLBACK_CHECK``): reduce_scatter_allgather
and reduce_scatter_gather with ``count < pow2``, recursive-doubling
allgather on other sizes than powers of two (``rule="fallback"``).

Limits
------
On a communicator with several ranks on some node (``nodes``), CH4 runs
node-aware compositions. Allreduce gets ``MPIDI_Allreduce_intra_composition_alpha``
(intra-node reduce in shared memory, allreduce among the node leaders with
the MPIR table, or the forced algorithm, on their communicator, intra-node
broadcast), modelled by rankopt's ``hierarchical`` allreduce: the same
three phases over the same groups, with rankopt's rings standing in for
MPICH's shared-memory phases and its leaders' algorithm
(``params["inter_algorithm"]`` names the latter). Broadcast and reduce get
node-aware compositions for small messages too; rankopt has no hierarchical
model of them and prices the flat MPIR choice (``params["note"]`` says so).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rankopt._validation import RankoptInputError
from rankopt.engines._common import env_int, node_sizes
from rankopt.engines.base import Choice, Env, MPIEngine, Nodes

__all__ = ["MPICH", "ENGINE", "algorithm", "auto", "MODELS", "CVARS", "ALLREDUCE_ALGORITHMS"]

KIB = 1 << 10

_SOURCE = (
    "src/mpi/coll/coll_selection.json, MPICH 5.0.2 (the MPIR selection table compiled "
    "into libmpi; maint/tuning/coll/mpir/generic.json in MPICH 4.x)"
)
_COMPOSITION_SOURCE = (
    "CH4 composition table (maint/tuning/coll/ch4/generic.json, MPICH 4.x-5.0.2): "
    "MPIDI_Allreduce_intra_composition_alpha"
)

#: ``MPIR_CVAR_<COLL>_INTRA_ALGORITHM`` per rankopt collective.
CVARS = {
    "allreduce": "MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM",
    "allgather": "MPIR_CVAR_ALLGATHER_INTRA_ALGORITHM",
    "reduce_scatter": "MPIR_CVAR_REDUCE_SCATTER_BLOCK_INTRA_ALGORITHM",
    "broadcast": "MPIR_CVAR_BCAST_INTRA_ALGORITHM",
    "reduce": "MPIR_CVAR_REDUCE_INTRA_ALGORITHM",
    "alltoall": "MPIR_CVAR_ALLTOALL_INTRA_ALGORITHM",
}

#: The scattered alltoall's batch of peers (0: every peer at once).
THROTTLE = "MPIR_CVAR_ALLTOALL_THROTTLE"

#: MPICH algorithm (its CVAR value) -> rankopt model whose traffic matches it
#: (``bench/mpich_check.py`` measures both), per collective.
MODELS: dict[str, dict[str, str]] = {
    "allreduce": {
        "recursive_doubling": "recursive_doubling",
        "reduce_scatter_allgather": "rabenseifner_mpich",  # halving at distance 1 first
        "ring": "ring",
    },
    "allgather": {"recursive_doubling": "recursive_doubling", "brucks": "bruck", "ring": "ring"},
    "reduce_scatter": {"recursive_halving": "recursive_halving", "pairwise": "pairwise"},
    "broadcast": {
        "binomial": "binomial",
        "scatter_recursive_doubling_allgather": "scatter_recursive_doubling_allgather",
        "scatter_ring_allgather": "scatter_ring_allgather",
    },
    "reduce": {"binomial": "binomial", "reduce_scatter_gather": "reduce_scatter_gather"},
    "alltoall": {
        "pairwise": "pairwise",
        "pairwise_sendrecv_replace": "pairwise",
        "scattered": "linear",  # up to MPIR_CVAR_ALLTOALL_THROTTLE peers at once
        "brucks": "pairwise",
    },
}

#: ``MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM`` value -> rankopt model.
ALLREDUCE_ALGORITHMS = MODELS["allreduce"]

#: Why a model only approximates the MPICH algorithm, where it does.
_NOTES = {
    ("alltoall", "brucks"): (
        "approximation: rankopt has no Bruck alltoall (ceil(lg n) steps of about half the "
        "buffer to rank + 2^k); pairwise prices the same blocks in n - 1 steps"
    ),
}


def _pow2(n: int) -> int:
    return 1 << (n.bit_length() - 1)


def _is_pow2(n: int) -> bool:
    return n & (n - 1) == 0


def _allreduce(nbytes: float, n: int, count: float) -> str:
    if nbytes <= 8 or count < _pow2(n):
        return "recursive_doubling"
    return "reduce_scatter_allgather"


def _allgather(nbytes: float, n: int, count: float) -> str:
    if _is_pow2(n):
        return "recursive_doubling" if nbytes < 512 * KIB else "ring"
    return "brucks" if nbytes < 80 * KIB else "ring"


def _reduce_scatter(nbytes: float, n: int, count: float) -> str:
    return "recursive_halving" if nbytes < 512 * KIB else "pairwise"


def _broadcast(nbytes: float, n: int, count: float) -> str:
    if n < 8 or nbytes <= 12 * KIB:
        return "binomial"
    if _is_pow2(n) and nbytes <= 512 * KIB:
        return "scatter_recursive_doubling_allgather"
    return "scatter_ring_allgather"


def _reduce(nbytes: float, n: int, count: float) -> str:
    if nbytes <= 2 * KIB or count < _pow2(n):
        return "binomial"
    return "reduce_scatter_gather"


def _alltoall(nbytes: float, n: int, count: float) -> str:
    per_peer = nbytes / n
    # the table's first branch reads comm_size<8, but 8 ranks of the 5.0.2
    # wheel run scattered (measured, bench/mpich_check.py): Bruck from 9 on
    if n > 8 and per_peer <= 256:
        return "brucks"
    return "scattered" if per_peer <= 32 * KIB else "pairwise"


_AUTO: dict[str, Callable[[float, int, float], str]] = {
    "allreduce": _allreduce,
    "allgather": _allgather,
    "reduce_scatter": _reduce_scatter,
    "broadcast": _broadcast,
    "reduce": _reduce,
    "alltoall": _alltoall,
}


def auto(collective: str, nbytes: float, n: int, *, itemsize: int = 8) -> str:
    """MPICH's default choice (its own name) for a flat communicator of ``n`` ranks.

    ``nbytes`` as rankopt counts it (:func:`rankopt.models.schedule.schedule`);
    ``itemsize`` gives the element count the allreduce and reduce rules read.

    Examples
    --------
    >>> auto("allreduce", 8, 8), auto("allreduce", 64, 8), auto("allreduce", 32, 8, itemsize=8)
    ('recursive_doubling', 'reduce_scatter_allgather', 'recursive_doubling')
    >>> auto("broadcast", 1 << 20, 8), auto("allgather", 8 * 1024, 9)
    ('scatter_ring_allgather', 'brucks')
    """
    return _AUTO[collective](float(nbytes), int(n), float(nbytes) / itemsize)


def _applies(collective: str, name: str, n: int, count: float) -> bool:
    """Whether MPICH runs a forced ``name`` (else it falls back to the table)."""
    if name in ("reduce_scatter_allgather", "reduce_scatter_gather"):
        return count >= _pow2(n)
    if (collective, name) == ("allgather", "recursive_doubling"):
        return _is_pow2(n)
    return True


def _forced(env: Env, collective: str) -> str | None:
    key = CVARS[collective]
    raw = str(env.get(key, "auto")).strip().lower()
    if raw in ("", "auto"):
        return None
    if raw not in MODELS[collective]:
        raise RankoptInputError(
            f"{key}: rankopt models {', '.join(MODELS[collective])} (or auto); got {raw!r}."
        )
    return raw


class MPICH(MPIEngine):
    """MPICH 4.x/5.0's JSON selection tables, with the CVARs that force an algorithm.

    :meth:`choose` reads ``nbytes`` as rankopt counts it, ``itemsize``
    (element bytes, default 8) for the count rules and ``nodes`` for the
    node-aware allreduce (module docstring). ``params`` holds
    ``engine_algorithm`` (MPICH's name), ``rule`` (``"auto"``, ``"forced"``
    or ``"fallback"``), ``source``, and ``note`` where the model is an
    approximation; node-aware calls add ``composition``.

    Examples
    --------
    >>> e = MPICH()
    >>> e.algorithm("allreduce", 8, 8, env={})[0], e.algorithm("allreduce", 64, 8, env={})[0]
    ('recursive_doubling', 'rabenseifner_mpich')
    >>> e.algorithm("allreduce", 1 << 20, 8, env={}, nodes=[0, 0, 1, 1, 2, 2, 3, 3])[0]
    'hierarchical'
    """

    name = "mpich"
    doc = "MPICH 4.x-5.0 default selection (coll_selection.json)"
    source = _SOURCE
    collectives = ("allreduce", "allgather", "reduce_scatter", "broadcast", "reduce", "alltoall")
    markers = ("mpich", "mvapich")
    launch_vars = ("PMI_RANK", "PMI_SIZE")
    local_vars = ("MPI_LOCALRANKID", "MPI_LOCALNRANKS")
    job_vars = ("PMI_KVSNAME",)

    def choose(
        self, collective: str, nbytes: float, n: int, *, env: Env, nodes: Nodes, itemsize: int = 8
    ) -> Choice:
        """The CH4 composition, then the forced algorithm or the MPIR table."""
        count = nbytes / itemsize
        sizes = node_sizes(nodes, n)
        node_aware = sizes is not None and len(sizes) < n
        if node_aware and collective == "allreduce":
            return self._composition(nbytes, n, count, len(sizes or ()), env, itemsize)
        name, rule = self._flat(collective, nbytes, n, count, env, itemsize)
        params: dict[str, Any] = {"engine_algorithm": name, "rule": rule, "source": _SOURCE}
        note = _NOTES.get((collective, name))
        if collective == "broadcast" and name == "scatter_recursive_doubling_allgather":
            if not _is_pow2(n):
                note = "approximation: on this size rankopt's schedule uses the ring allgather"
        if node_aware and collective in ("broadcast", "reduce"):
            note = (
                "several ranks per node: MPICH may run a node-aware composition "
                f"(node leaders, then shared memory); rankopt prices the flat {name}"
            )
        model = MODELS[collective][name]
        if (collective, name) == ("alltoall", "scattered"):
            # MPIR_Alltoall_intra_scattered posts THROTTLE peers' blocks, waits, repeats
            throttle = env_int(env, THROTTLE, 32)
            if 0 < throttle < n:
                params["throttle"] = throttle
                note = f"blocks posted {throttle} peers at a time: priced as pairwise"
                model = "pairwise"
        if note:
            params["note"] = note
        return model, params

    @staticmethod
    def _flat(
        collective: str, nbytes: float, n: int, count: float, env: Env, itemsize: int
    ) -> tuple[str, str]:
        forced = _forced(env, collective)
        if forced is None:
            return auto(collective, nbytes, n, itemsize=itemsize), "auto"
        if _applies(collective, forced, n, count):
            return forced, "forced"
        return auto(collective, nbytes, n, itemsize=itemsize), "fallback"

    def _composition(
        self, nbytes: float, n: int, count: float, n_nodes: int, env: Env, itemsize: int
    ) -> Choice:
        """Allreduce on a communicator with several ranks on some node."""
        if n_nodes == 1:
            params: dict[str, Any] = {
                "engine_algorithm": "shared_memory",
                "composition": "MPIDI_Allreduce_intra_composition_gamma",
                "rule": "auto",
                "source": _COMPOSITION_SOURCE.replace("alpha", "gamma"),
                "note": "one node: MPICH reduces in shared memory (no network to order)",
            }
            return "hierarchical", params
        inter, rule = self._flat("allreduce", nbytes, n_nodes, count, env, itemsize)
        params = {
            "engine_algorithm": "composition_alpha",
            "composition": "MPIDI_Allreduce_intra_composition_alpha",
            "inter_algorithm": inter,
            "rule": rule,
            "source": _COMPOSITION_SOURCE,
            "note": (
                "intra-node reduce, allreduce of the node leaders "
                f"({inter}), intra-node broadcast: rankopt's hierarchical model prices the "
                "same phases with rings"
            ),
        }
        return "hierarchical", params


ENGINE = MPICH()
#: ``algorithm(collective, nbytes, n, *, env, nodes, itemsize=8)``: :meth:`MPICH.algorithm`.
algorithm = ENGINE.algorithm
