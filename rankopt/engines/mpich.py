"""MPICH (4.x): its default ("auto") collective selection and the CVARs that change it.

The rule (``src/mpi/coll/allreduce/allreduce_intra_*`` /
``MPIR_Allreduce_intra_auto`` and the CH4 ``MPIDI_*_Allreduce_select``
containers, MPICH 3.3-4.x): recursive doubling when the vector is at most
``MPIR_CVAR_ALLREDUCE_SHORT_MSG_SIZE`` bytes (default 2048), the op is not
built in, or ``count < pof2``; otherwise Rabenseifner's reduce-scatter +
allgather (MPICH's recursive-halving step order, rankopt's
``"rabenseifner"``). ``MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM`` forces one
(``recursive_doubling``, ``reduce_scatter_allgather``, ``ring``, ...;
``auto`` keeps the rule). Alltoall: pairwise exchange above
``MPIR_CVAR_ALLTOALL_MEDIUM_MSG_SIZE`` (32768) per peer, which is the only
alltoall rankopt models.
"""

from __future__ import annotations

from typing import Any

from rankopt._validation import RankoptInputError
from rankopt.engines.base import Choice, Env, MPIEngine, Nodes

__all__ = ["MPICH", "ENGINE", "algorithm", "ALLREDUCE_ALGORITHMS", "SHORT_MSG_SIZE"]

#: Default of ``MPIR_CVAR_ALLREDUCE_SHORT_MSG_SIZE`` (``allreduce.c`` CVAR block).
SHORT_MSG_SIZE = 2048

#: ``MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM`` value -> rankopt model.
ALLREDUCE_ALGORITHMS = {
    "recursive_doubling": "recursive_doubling",
    "reduce_scatter_allgather": "rabenseifner",
    "ring": "ring",
}


class MPICH(MPIEngine):
    """MPICH's ``auto`` allreduce selection, with its CVAR overrides.

    Examples
    --------
    >>> e = MPICH()
    >>> e.algorithm("allreduce", 2048, 8, env={})[0], e.algorithm("allreduce", 2056, 8, env={})[0]
    ('recursive_doubling', 'rabenseifner')
    """

    name = "mpich"
    doc = "MPICH 4.x default selection"
    source = "src/mpi/coll/allreduce (MPIR_Allreduce_intra_auto), MPICH 3.3-4.x"
    collectives = ("allreduce",)
    markers = ("mpich", "mvapich")
    launch_vars = ("PMI_RANK", "PMI_SIZE")

    def choose(
        self, collective: str, nbytes: float, n: int, *, env: Env, nodes: Nodes, itemsize: int = 8
    ) -> Choice:
        """Allreduce: the CVAR-forced algorithm, else the size rule (``itemsize``: element bytes)."""
        params: dict[str, Any] = {"source": self.source}
        forced = str(env.get("MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM", "auto")).strip().lower()
        if forced not in ("", "auto"):
            if forced not in ALLREDUCE_ALGORITHMS:
                raise RankoptInputError(
                    "MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM: rankopt models "
                    f"{', '.join(ALLREDUCE_ALGORITHMS)} (or auto); got {forced!r}."
                )
            params.update(engine_algorithm=forced, rule="forced")
            return ALLREDUCE_ALGORITHMS[forced], params
        raw = env.get("MPIR_CVAR_ALLREDUCE_SHORT_MSG_SIZE", SHORT_MSG_SIZE)
        try:
            short = float(raw)
        except (TypeError, ValueError):
            raise RankoptInputError(
                f"MPIR_CVAR_ALLREDUCE_SHORT_MSG_SIZE must be a number of bytes; got {raw!r}."
            ) from None
        pof2 = 1 << (n.bit_length() - 1)
        name = (
            "recursive_doubling"
            if nbytes <= short or nbytes / itemsize < pof2
            else "reduce_scatter_allgather"
        )
        params.update(engine_algorithm=name, rule="auto", short_msg_size=short)
        return ALLREDUCE_ALGORITHMS[name], params


ENGINE = MPICH()
#: ``algorithm(collective, nbytes, n, *, env, nodes, itemsize=8)``: :meth:`MPICH.algorithm`.
algorithm = ENGINE.algorithm
