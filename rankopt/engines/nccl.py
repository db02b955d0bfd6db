"""NCCL: ring or tree for an allreduce, from a simplified form of its tuning model.

NCCL prices every algorithm x protocol with ``time = latency + bytes /
algBw`` and takes the cheapest (``src/graph/tuning.cc``,
``ncclTopoTuneModel``, NCCL 2.1x; sjeaugey, NVIDIA/nccl#457). This module
keeps the Simple protocol and the two algorithms a rank order can affect:

* ring: ``lat = baseLat + (2(n-1) - 2m) intraLat + 2m interLat`` (m nodes,
  no inter-node steps on one node), ``algBw = busBw * n / (2(n-1))``;
* tree: ``lat = baseLat + 2 ((n/m - 1) intraLat + log2(m) interLat)``,
  ``algBw = 0.92 busBw * 0.5`` (the tree allreduce's ratio and NCCL's
  tree-bandwidth refinement); only across nodes (one node: ring).

Constants are NCCL's Simple-protocol latencies in microseconds
(``baseLat`` Tree 0, Ring 8.4; ``hwLat`` NET Tree 14, Ring 14; PCI Tree 6,
Ring 5.7). ``busBw`` is ``NCCL_RANKOPT_BUSBW`` GB/s (default 12.5, one
100 Gb/s NIC). ``NCCL_ALGO`` (``Ring``/``Tree``, or a ``^`` exclusion)
forces the choice. Both are built over *node* order: a node's ranks are
contiguous in NCCL's graphs, so rankopt orders nodes (``params
["granularity"] == "node"``); the tree is rankopt's
``"double_binary_tree"`` (``ncclGetDtree``).

Allgather and reduce-scatter are rings. Broadcast has one algorithm, the
ring: the root's data flows along it, pipelined in chunks (rankopt's
``"chain"`` from new rank 0). Alltoall is no NCCL collective: torch's
``ProcessGroupNCCL`` posts an ``ncclSend`` and an ``ncclRecv`` for every peer
in one group, all at once (rankopt's ``"linear"``, the same cost under every
order). Reduce (a ring ending at the root) has no rankopt model yet and gets
the default.
"""

from __future__ import annotations

import math
from typing import Any

from rankopt._validation import RankoptInputError
from rankopt.engines._common import node_sizes
from rankopt.engines.base import Choice, Env, Nodes, TorchEngine

__all__ = ["NCCL", "ENGINE", "algorithm", "BASE_LAT", "HW_LAT", "predicted_times"]

#: Simple-protocol base latency (us) per algorithm, ``baseLat`` in tuning.cc.
BASE_LAT = {"tree": 0.0, "ring": 8.4}
#: Simple-protocol per-hop latency (us): ``hwLat[NCCL_HW_PCI|NCCL_HW_NET]``.
HW_LAT = {"pci": {"tree": 6.0, "ring": 5.7}, "net": {"tree": 14.0, "ring": 14.0}}
#: Tree bandwidth refinement in tuning.cc (``busBw * .92``).
TREE_BW_FACTOR = 0.92
MODEL = {"ring": "ring", "tree": "double_binary_tree"}


def predicted_times(nbytes: float, n: int, m: int, busbw: float) -> dict[str, float]:
    """Modelled seconds of ring and tree (``m`` nodes, ``busbw`` bytes/s)."""
    intra, inter = HW_LAT["pci"], HW_LAT["net"]
    nsteps = 2 * (n - 1)
    inter_steps = 2 * m if m > 1 else 0
    ring_lat = BASE_LAT["ring"] + (nsteps - inter_steps) * intra["ring"]
    ring_lat += inter_steps * inter["ring"]
    times = {"ring": ring_lat * 1e-6 + nbytes / (busbw * n / nsteps)}
    if m > 1:
        tree_lat = BASE_LAT["tree"] + 2 * (
            (n / m - 1) * intra["tree"] + math.floor(math.log2(m)) * inter["tree"]
        )
        times["tree"] = tree_lat * 1e-6 + nbytes / (TREE_BW_FACTOR * busbw * 0.5)
    return times


class NCCL(TorchEngine):
    """NCCL's ring or tree, over node order (``nodes``: node of each rank; default one a node).

    Examples
    --------
    >>> e = NCCL()
    >>> e.algorithm("allreduce", 4096, 16, env={})[0], e.algorithm("allreduce", 256e6, 16, env={})[0]
    ('double_binary_tree', 'ring')
    """

    name = "nccl"
    doc = "NCCL ring/tree tuning model (simplified)"
    source = (
        "src/graph/tuning.cc (ncclTopoTuneModel, NCCL 2.1x), simplified: Simple protocol; "
        "alltoall: torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp"
    )
    collectives = ("allreduce", "allgather", "reduce_scatter", "broadcast", "alltoall")
    granularity = "node"
    markers = ("nccl",)

    def choose(self, collective: str, nbytes: float, n: int, *, env: Env, nodes: Nodes) -> Choice:
        """Allreduce: the cheaper of ring and tree by the tuning model; the others: fixed."""
        sizes = node_sizes(nodes, n)
        m = n if sizes is None else len(sizes)
        params: dict[str, Any] = {"nodes": m, "source": self.source}
        if collective == "broadcast":
            params.update(engine_algorithm="ring", rule="ring only")
            return "chain", params
        if collective == "alltoall":
            params.update(engine_algorithm="ncclSend/ncclRecv to every peer, grouped", rule="fixed")
            return "linear", params
        if collective != "allreduce":
            params.update(engine_algorithm="ring", rule="ring only")
            return "ring", params
        raw_bw = env.get("NCCL_RANKOPT_BUSBW", "12.5")
        try:
            busbw = float(raw_bw) * 1e9
        except ValueError:
            raise RankoptInputError(f"NCCL_RANKOPT_BUSBW must be GB/s; got {raw_bw!r}.") from None
        times = predicted_times(nbytes, n, m, busbw)
        allowed = _allowed(str(env.get("NCCL_ALGO", "")))
        cand = {a: t for a, t in times.items() if a in allowed} or {"ring": times["ring"]}
        choice = min(cand, key=lambda a: cand[a])
        params.update(
            engine_algorithm=choice,
            rule="forced" if allowed != {"ring", "tree"} else "tuning model",
            modelled_times=times,
        )
        return MODEL[choice], params


ENGINE = NCCL()
#: ``algorithm(collective, nbytes, n, *, env, nodes)``: :meth:`NCCL.algorithm`.
algorithm = ENGINE.algorithm


def _allowed(spec: str) -> set[str]:
    spec = spec.strip().lower()
    if not spec:
        return {"ring", "tree"}
    names = {x.strip() for x in spec.lstrip("^").split(",") if x.strip()}
    return {"ring", "tree"} - names if spec.startswith("^") else {"ring", "tree"} & names
