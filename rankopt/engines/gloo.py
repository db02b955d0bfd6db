"""Gloo as torch 2.x's ``ProcessGroupGloo`` uses it on CPU tensors.

``ProcessGroupGloo::allreduce`` on dense CPU tensors runs
``AsyncAllreduceWork``, which calls ``gloo::allreduce(opts)`` without
setting an algorithm (``torch/csrc/distributed/c10d/ProcessGroupGloo.cpp``,
torch 2.x); ``gloo/allreduce.cc`` maps ``UNSPECIFIED`` to ``ring``: a ring
reduce-scatter and allgather over process-group rank order, rank ``r``
sending to ``r - 1`` (``sendRank = rank - 1``; Open MPI's and MPICH's rings send
to ``r + 1``), at every size
(the size-based ``ring``/``ring_chunked``/``bcube`` choice belonged to
torch 1.x's ``AlgorithmEntry`` cache and is gone). The other collectives
call one Gloo function each, with no choice either (the files are those
the torch wheel's ``libtorch_cpu.so`` names):

==============  ========================================================
allgather       ring, rank ``r`` sending to ``r + 1`` (``gloo/allgather.cc``)
reduce_scatter  the allreduce above of the whole input, each rank then keeping
                its block (``reduce_scatter_tensor_coalesced``; on 4
                processes here 22 ms against 18 ms for the allreduce of
                8 MiB and 11 ms for the allgather); rankopt's
                ``allreduce_gloo``
broadcast       binomial tree, distance 1 first: virtual rank ``v`` (the
                root is 0) gets the message from ``v - 2**k`` (``k`` its
                top bit) and sends it on to ``v + 2**i`` for every
                ``2**i > v`` (``gloo/broadcast.cc``); rankopt's
                ``binomial_gloo``, not MPICH's ``binomial`` (largest
                distance first). A process posts all of its sends
                at once as soon as it has the message, so they share
                its link: the model is :class:`~rankopt.models.flow.FlowTime`,
                not a step model
reduce          ring reduce-scatter with rank ``r`` sending to ``r - 1``,
                then every chunk straight to the root (``gloo/reduce.cc``);
                rankopt's ``ring_gather``
alltoall        every send and receive posted at once, to ``r + i`` and
                from ``r - i`` (``gloo/alltoall.cc``); rankopt's
                ``linear``, whose cost no order changes
==============  ========================================================
"""

from __future__ import annotations

from rankopt.engines.base import Choice, Env, Nodes, TorchEngine

__all__ = ["Gloo", "ENGINE", "algorithm", "TABLE"]

#: collective -> (rankopt model, Gloo's algorithm), torch 2.x CPU.
TABLE = {
    "allreduce": (
        "ring_gloo",
        "ring, rank r sending to r - 1 (gloo/allreduce.cc, algorithm UNSPECIFIED)",
    ),
    "allgather": ("ring", "ring, rank r sending to r + 1 (gloo/allgather.cc)"),
    "reduce_scatter": (
        "allreduce_gloo",
        "the ring allreduce of the whole input (ProcessGroupGloo reduce_scatter)",
    ),
    "broadcast": ("binomial_gloo", "binomial tree, distance 1 first (gloo/broadcast.cc)"),
    "reduce": ("ring_gather", "ring reduce-scatter, then a gather to the root (gloo/reduce.cc)"),
    "alltoall": ("linear", "every send and receive at once (gloo/alltoall.cc)"),
}


class Gloo(TorchEngine):
    """torch.distributed's Gloo backend: rings over process-group rank order, and its trees.

    Examples
    --------
    >>> Gloo().algorithm("allreduce", 25e6, 8)[0]
    'ring_gloo'
    >>> Gloo().algorithm("broadcast", 25e6, 8)[0]
    'binomial_gloo'
    """

    name = "gloo"
    doc = "Gloo as torch 2.x ProcessGroupGloo uses it"
    source = (
        "torch/csrc/distributed/c10d/ProcessGroupGloo.cpp (torch 2.x); gloo/allreduce.cc, "
        "allgather.cc, broadcast.cc, reduce.cc, alltoall.cc"
    )
    collectives = tuple(TABLE)
    markers = ("gloo",)

    def choose(self, collective: str, nbytes: float, n: int, *, env: Env, nodes: Nodes) -> Choice:
        """One algorithm per collective, at every size (no size-based choice in torch 2.x)."""
        model, name = TABLE[collective]
        return model, {"engine_algorithm": name, "rule": "fixed", "source": self.source}


ENGINE = Gloo()
#: ``algorithm(collective, nbytes, n, *, env, nodes)``: :meth:`Gloo.algorithm`.
algorithm = ENGINE.algorithm
