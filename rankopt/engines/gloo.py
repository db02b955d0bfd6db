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

import os
from collections.abc import Mapping, Sequence
from typing import Any

from rankopt.engines._common import FALLBACK, check_call

__all__ = ["algorithm", "TABLE"]

#: collective -> (rankopt model, Gloo's algorithm), torch 2.x CPU.
TABLE = {
    "allreduce": ("ring", "ring (gloo/allreduce.cc, algorithm UNSPECIFIED)"),
    "allgather": ("ring", "ring (gloo/allgather.cc)"),
    "reduce_scatter": ("ring", "ring"),
}

_SOURCE = "torch/csrc/distributed/c10d/ProcessGroupGloo.cpp (torch 2.x), gloo/allreduce.cc"


def algorithm(
    collective: str,
    nbytes: float,
    n: int,
    *,
    env: Mapping[str, str] = os.environ,
    nodes: Sequence[Any] | None = None,
) -> tuple[str, dict[str, Any]]:
    """The algorithm torch's Gloo backend runs for one call.

    Examples
    --------
    >>> algorithm("allreduce", 25e6, 8)[0]
    'ring'
    """
    check_call(collective, nbytes, n)
    if collective in TABLE:
        model, name = TABLE[collective]
        return model, {"engine": "gloo", "engine_algorithm": name, "rule": "fixed",
                       "source": _SOURCE}  # fmt: skip
    return FALLBACK[collective], {"engine": "gloo", "engine_algorithm": None,
                                  "rule": "untabulated", "source": "rankopt default"}  # fmt: skip
