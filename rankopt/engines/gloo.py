"""Gloo as torch 2.x's ``ProcessGroupGloo`` uses it on CPU tensors.

``ProcessGroupGloo::allreduce`` on dense CPU tensors runs
``AsyncAllreduceWork``, which calls ``gloo::allreduce(opts)`` without
setting an algorithm (``torch/csrc/distributed/c10d/ProcessGroupGloo.cpp``,
torch 2.x); ``gloo/allreduce.cc`` maps ``UNSPECIFIED`` to ``ring``: a ring
reduce-scatter and allgather over process-group rank order, at every size
(the size-based ``ring``/``ring_chunked``/``bcube`` choice belonged to
torch 1.x's ``AlgorithmEntry`` cache and is gone). Allgather and
reduce-scatter are rings as well; broadcast, reduce and alltoall use the
rankopt defaults.
"""

from __future__ import annotations

from rankopt.engines.base import Choice, Env, Nodes, TorchEngine

__all__ = ["Gloo", "ENGINE", "algorithm", "TABLE"]

#: collective -> (rankopt model, Gloo's algorithm), torch 2.x CPU.
TABLE = {
    "allreduce": ("ring", "ring (gloo/allreduce.cc, algorithm UNSPECIFIED)"),
    "allgather": ("ring", "ring (gloo/allgather.cc)"),
    "reduce_scatter": ("ring", "ring"),
}


class Gloo(TorchEngine):
    """torch.distributed's Gloo backend: a ring over process-group rank order.

    Examples
    --------
    >>> Gloo().algorithm("allreduce", 25e6, 8)[0]
    'ring'
    """

    name = "gloo"
    doc = "Gloo as torch 2.x ProcessGroupGloo uses it"
    source = "torch/csrc/distributed/c10d/ProcessGroupGloo.cpp (torch 2.x), gloo/allreduce.cc"
    collectives = tuple(TABLE)
    markers = ("gloo",)

    def choose(self, collective: str, nbytes: float, n: int, *, env: Env, nodes: Nodes) -> Choice:
        """The ring, at every size (no size-based choice left in torch 2.x)."""
        model, name = TABLE[collective]
        return model, {"engine_algorithm": name, "rule": "fixed", "source": self.source}


ENGINE = Gloo()
#: ``algorithm(collective, nbytes, n, *, env, nodes)``: :meth:`Gloo.algorithm`.
algorithm = ENGINE.algorithm
