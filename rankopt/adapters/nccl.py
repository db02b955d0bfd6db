"""NCCL: orders that respect nodes, and NCCL's inter-node ring and trees predicted from them.

NCCL numbers nodes by their lowest rank (the first node to appear in rank order
is node 0) and builds its inter-node ring ``node 0 -> node 1 -> ... -> node 0``
and its double binary tree over those node numbers. Inside a node it follows
its own topology search, not rank numbers. So for NCCL only the *node order*
of a rank order matters:

- :func:`node_matrix` -- node-level latency/bandwidth from a rank-level measurement.
- :func:`expand_node_order` -- a node order to a rank order (each node's ranks
  contiguous, in their original order).
- :func:`solve_nodes` -- solve on the node-level matrix and expand.
- :func:`node_traffic` -- a job's point-to-point traffic between the blocks of
  ranks that node-granular orders place on one node each.
- :func:`predict` -- NCCL's node numbering, inter-node ring and the parent/child
  pairs of both trees for a rank order, with no GPU.
- :func:`btree`, :func:`dtree` -- the tree construction of NCCL's ``trees.cc``
  (``ncclGetBtree``/``ncclGetDtree``) on ``n`` nodes, written anew in Python.

Pure Python and NumPy: nothing here imports torch.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from rankopt._validation import RankoptInputError
from rankopt.adapters._common import as_order, check_hosts, node_index

__all__ = [
    "btree",
    "dtree",
    "NcclPattern",
    "predict",
    "node_matrix",
    "expand_node_order",
    "solve_nodes",
    "node_traffic",
    "is_node_contiguous",
]


def btree(n: int, node: int) -> tuple[int, tuple[int, ...]]:
    """Parent and children of ``node`` in NCCL's binary tree on ``n`` nodes (root 0).

    The tree is an in-order binary tree over ``1..n-1`` hung below node 0: node
    ``x`` with lowest set bit ``b`` has children ``x - b/2`` and ``x + b/2``
    (the latter shrunk by halving until it exists) and its parent is
    ``(x ^ b) | 2b``, or ``x ^ b`` when that is out of range.

    Parameters
    ----------
    n : int
        Number of nodes (>= 1).
    node : int
        Node index in ``0..n-1``.

    Returns
    -------
    parent : int
        -1 for the root.
    children : tuple of int
        Zero, one or two children, in NCCL's slot order.

    Examples
    --------
    The tree drawn in NCCL's ``trees.cc`` for 14 nodes:

    >>> btree(14, 0), btree(14, 8), btree(14, 12), btree(14, 13)
    ((-1, (8,)), (0, (4, 12)), (8, (10, 13)), (12, ()))
    """
    _check_node(n, node)
    bit = 1
    while bit < n and not bit & node:
        bit <<= 1
    if node == 0:
        return -1, ((bit >> 1,) if n > 1 else ())
    up = (node ^ bit) | (bit << 1)
    if up >= n:
        up = node ^ bit
    low = bit >> 1
    down0 = -1 if low == 0 else node - low
    down1 = -1 if low == 0 else node + low
    # NCCL halves the step after testing it, so the first out-of-range test repeats the
    # same candidate once; the reachable children are the same either way.
    while down1 >= n:
        down1 = -1 if low == 0 else node + low
        low >>= 1
    return up, tuple(c for c in (down0, down1) if c != -1)


def dtree(n: int, node: int) -> tuple[tuple[int, tuple[int, ...]], tuple[int, tuple[int, ...]]]:
    """Parent and children of ``node`` in both trees of NCCL's double binary tree.

    Tree 0 is :func:`btree`. Tree 1 is its mirror image ``x -> n-1-x`` when ``n``
    is even (root ``n-1``) and its shift ``x -> x+1 mod n`` when ``n`` is odd
    (root 1), so that a node that is a leaf in one tree is (mostly) inner in
    the other.

    Examples
    --------
    >>> dtree(4, 0)
    ((-1, (2,)), (1, ()))
    >>> dtree(3, 1)
    ((2, ()), (-1, (0,)))
    """
    t0 = btree(n, node)
    if n % 2 == 1:
        u, ch = btree(n, (node - 1) % n)
        t1 = (-1 if u == -1 else (u + 1) % n, tuple((c + 1) % n for c in ch))
    else:
        u, ch = btree(n, n - 1 - node)
        t1 = (-1 if u == -1 else n - 1 - u, tuple(n - 1 - c for c in ch))
    return t0, t1


def _check_node(n: int, node: int) -> None:
    if n < 1:
        raise RankoptInputError(f"`n` must be >= 1; got {n}.")
    if not 0 <= node < n:
        raise RankoptInputError(f"`node` must be in 0..{n - 1}; got {node}.")


@dataclass(frozen=True)
class NcclPattern:
    """NCCL's inter-node communication pattern for one rank order.

    Attributes
    ----------
    nodes : tuple of str
        Host of every NCCL node, ``nodes[j]`` being node ``j`` (nodes numbered by
        their lowest new rank).
    node_ranks : tuple of tuple of int
        New ranks on each node, ascending.
    ring : tuple of (int, int)
        Directed inter-node ring edges ``(j, j+1 mod m)``; empty for one node.
    trees : tuple of two tuples of (int, int)
        ``(parent, child)`` node pairs of tree 0 and tree 1, sorted.
    contiguous : bool
        Whether every node's new ranks are consecutive.
    """

    nodes: tuple[str, ...]
    node_ranks: tuple[tuple[int, ...], ...]
    ring: tuple[tuple[int, int], ...]
    trees: tuple[tuple[tuple[int, int], ...], tuple[tuple[int, int], ...]]
    contiguous: bool

    def host_pairs(self, edges: Sequence[tuple[int, int]]) -> list[tuple[str, str]]:
        """The same edges with host names instead of node numbers."""
        return [(self.nodes[a], self.nodes[b]) for a, b in edges]


def predict(order: ArrayLike, hosts: Any) -> NcclPattern:
    """Predict NCCL's node numbering, inter-node ring and trees for a rank order.

    Parameters
    ----------
    order : array_like of int, shape (n,)
        ``order[k]`` is the original rank of the process that gets new rank ``k``.
    hosts : sequence of str or Measurement
        Host of every original rank.

    Returns
    -------
    NcclPattern

    Notes
    -----
    Covers NCCL's inter-node ring and double binary tree (``NCCL_ALGO=Ring,Tree``).
    Which GPU of a node sends to the next node, the intra-node chains, CollNet,
    NVLS and PAT are decided by NCCL's topology search and are out of scope.

    Examples
    --------
    Two ranks per host; the order visits hosts b, a, c:

    >>> p = predict([2, 3, 0, 1, 4, 5], ["a", "a", "b", "b", "c", "c"])
    >>> p.nodes, p.ring
    (('b', 'a', 'c'), ((0, 1), (1, 2), (2, 0)))
    >>> p.trees  # tree 0: b -> c -> a; tree 1 (shifted): a -> b -> c
    (((0, 2), (2, 1)), ((0, 2), (1, 0)))
    """
    arr = as_order(order)
    names = check_hosts(hosts, arr.size)
    by_new = [names[i] for i in arr]
    node_of = node_index(by_new)
    m = int(node_of.max()) + 1
    labels = tuple(by_new[int(np.flatnonzero(node_of == j)[0])] for j in range(m))
    ranks = tuple(tuple(int(k) for k in np.flatnonzero(node_of == j)) for j in range(m))
    contiguous = all(r[-1] - r[0] == len(r) - 1 for r in ranks)
    ring = tuple((j, (j + 1) % m) for j in range(m)) if m > 1 else ()
    t0, t1 = [], []
    for j in range(m):
        (p0, _), (p1, _) = dtree(m, j)
        if p0 != -1:
            t0.append((p0, j))
        if p1 != -1:
            t1.append((p1, j))
    return NcclPattern(labels, ranks, ring, (tuple(sorted(t0)), tuple(sorted(t1))), contiguous)


def is_node_contiguous(order: ArrayLike, hosts: Any) -> bool:
    """Whether each host's processes get consecutive new ranks.

    Examples
    --------
    >>> is_node_contiguous([0, 2, 1, 3], ["a", "b", "a", "b"])
    True
    >>> is_node_contiguous([0, 1, 2, 3], ["a", "b", "a", "b"])
    False
    """
    return predict(order, hosts).contiguous


Reduce = Literal["median", "mean", "min", "max"]


def node_matrix(
    matrix: ArrayLike, hosts: Any, *, reduce: Reduce = "median"
) -> tuple[NDArray[np.float64], tuple[str, ...]]:
    """Reduce a rank-level matrix to a node-level one.

    Parameters
    ----------
    matrix : array_like, shape (n, n)
        Latency (or bandwidth) between original ranks; NaN entries are ignored.
    hosts : sequence of str or Measurement
        Host of every original rank.
    reduce : {"median", "mean", "min", "max"}
        How the ``|a| * |b|`` rank pairs between nodes ``a`` and ``b`` are combined.

    Returns
    -------
    node_mat : ndarray, shape (m, m)
        Zero diagonal; nodes numbered by first appearance in original rank order.
    nodes : tuple of str
        Host of each node.

    Examples
    --------
    >>> lat = [[0, 1, 5, 5], [1, 0, 7, 5], [5, 7, 0, 1], [5, 5, 1, 0]]
    >>> m, nodes = node_matrix(lat, ["x", "x", "y", "y"])
    >>> m.tolist(), nodes
    ([[0.0, 5.0], [5.0, 0.0]], ('x', 'y'))
    """
    a = np.asarray(matrix, dtype=np.float64)
    names = check_hosts(hosts, a.shape[0] if a.ndim == 2 else None)
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise RankoptInputError(f"`matrix` must be square; got shape {a.shape} instead.")
    funcs: dict[str, Any] = {
        "median": np.nanmedian,
        "mean": np.nanmean,
        "min": np.nanmin,
        "max": np.nanmax,
    }
    if reduce not in funcs:
        raise RankoptInputError(f"`reduce` must be one of {sorted(funcs)}; got {reduce!r}.")
    node_of = node_index(names)
    m = int(node_of.max()) + 1
    labels = tuple(names[int(np.flatnonzero(node_of == j)[0])] for j in range(m))
    out = np.zeros((m, m))
    members = [np.flatnonzero(node_of == j) for j in range(m)]
    for x in range(m):
        for y in range(m):
            if x != y:
                block = a[np.ix_(members[x], members[y])]
                if np.isnan(block).all():
                    raise RankoptInputError(
                        f"`matrix` has no measured pair between hosts {labels[x]!r} "
                        f"and {labels[y]!r}."
                    )
                out[x, y] = funcs[reduce](block)
    return out, labels


def expand_node_order(node_order: ArrayLike, hosts: Any) -> NDArray[np.int64]:
    """Rank order that visits nodes in ``node_order``, each node's ranks contiguous.

    ``node_order[j]`` is a node index (nodes numbered by first appearance in
    original rank order, as :func:`node_matrix` does); within a node, ranks keep
    their original relative order.

    Examples
    --------
    >>> expand_node_order([1, 0], ["a", "b", "a", "b"]).tolist()
    [1, 3, 0, 2]
    """
    names = check_hosts(hosts)
    node_of = node_index(names)
    m = int(node_of.max()) + 1
    norder = as_order(node_order, m, name="node_order")
    return np.concatenate([np.flatnonzero(node_of == j) for j in norder]).astype(np.int64)


def node_traffic(traffic: Any, hosts: Any) -> Any:
    """The traffic between the blocks of ranks a node-granular order puts on one node each.

    A node-granular order (:func:`expand_node_order`) gives the program's
    ranks to the nodes in blocks: with ``g`` ranks on every node, ranks
    ``b g`` to ``(b + 1) g - 1`` run on the ``b``-th node of the order. So
    the traffic that the node order decides is the traffic between blocks;
    a block's traffic to itself stays inside one node whatever the order and
    is left out.

    Parameters
    ----------
    traffic : Traffic or anything :func:`rankopt.models.traffic.as_traffic` reads
        By the program's rank, ``n`` ranks.
    hosts : sequence of str
        Host of every launch rank (``n`` of them).

    Returns
    -------
    Traffic
        Between the ``m`` blocks (``m`` nodes).

    Raises
    ------
    RankoptInputError
        When the nodes hold different numbers of ranks: the blocks then
        depend on the order itself (rank granularity handles that job).

    Examples
    --------
    >>> from rankopt.models.traffic import Traffic
    >>> t = Traffic.from_pairs(4, [0, 1, 2], [1, 2, 3], [5.0, 7.0, 9.0], [1, 2, 3])
    >>> b = node_traffic(t, ["a", "b", "a", "b"])
    >>> b.bytes.toarray().tolist(), b.messages.toarray().tolist()
    ([[0.0, 7.0], [0.0, 0.0]], [[0.0, 2.0], [0.0, 0.0]])
    """
    from rankopt.models.traffic import Traffic, as_traffic

    names = check_hosts(hosts)
    n = len(names)
    t = as_traffic(traffic, n)
    counts = np.bincount(node_index(names))
    if counts.min() != counts.max():
        raise RankoptInputError(
            f"node-granular ordering with `traffic` needs the same number of ranks on every "
            f"node; got {counts.min()} to {counts.max()} ranks per node "
            f"({counts.size} nodes). Order the ranks one by one instead (granularity 'rank')."
        )
    block = np.arange(n, dtype=np.int64) // int(counts[0])
    src, dst = t.messages.nonzero()
    nbytes = np.asarray(t.bytes[src, dst]).reshape(-1)
    messages = np.asarray(t.messages[src, dst]).reshape(-1)
    return Traffic.from_pairs(
        counts.size, block[src], block[dst], nbytes, messages, where="traffic by node"
    )


def solve_nodes(
    latency: Any,
    hosts: Any = None,
    collective: str = "allreduce",
    algorithm: str = "ring",
    *,
    bandwidth: ArrayLike | None = None,
    reduce: Reduce = "median",
    keep_rank0: bool = True,
    **solve_options: Any,
) -> tuple[NDArray[np.int64], Any]:
    """Node-granular order: solve on the node-level matrix, expand to ranks.

    Parameters
    ----------
    latency : array_like or Measurement
        Rank-level latency (a Measurement also supplies ``bandwidth`` and ``hosts``).
    hosts : sequence of str, optional
        Host of every original rank; default ``latency.hosts``.
    collective, algorithm : str
        Passed to ``rankopt.solve`` for the node-level problem.
    bandwidth : array_like, optional
        Rank-level bandwidth, reduced like the latency.
    reduce : str
        See :func:`node_matrix`.
    keep_rank0 : bool, default True
        Keep the node of original rank 0 first, so rank 0 keeps new rank 0.
    **solve_options
        Other ``rankopt.solve`` options. A ``traffic`` (or a ``workload``
        file that carries one) is priced between the blocks of ranks each
        node receives (:func:`node_traffic`).

    Returns
    -------
    order : ndarray of int64
        Rank order, node-contiguous; ``order[0] == 0`` under ``keep_rank0``.
    result : SolveResult or None
        The node-level result (``result.order`` orders nodes); None with fewer
        than three nodes, where every node ring is the same.

    Examples
    --------
    >>> import numpy as np
    >>> hosts = ["a", "a", "b", "b", "c", "c", "d", "d"]
    >>> far = np.array([[0, 1, 9, 1], [1, 0, 1, 9], [9, 1, 0, 1], [1, 9, 1, 0]], float)
    >>> lat = np.kron(far, np.ones((2, 2)))            # doctest: +SKIP
    >>> order, res = solve_nodes(lat, hosts)           # doctest: +SKIP
    """
    lat = getattr(latency, "latency", latency)
    if bandwidth is None:
        bandwidth = getattr(latency, "bandwidth", None)
    if hosts is None:
        hosts = getattr(latency, "hosts", None)
    lat_arr = np.asarray(lat, dtype=np.float64)
    names = check_hosts(hosts, lat_arr.shape[0] if lat_arr.ndim == 2 else None)
    node_lat, _ = node_matrix(lat_arr, names, reduce=reduce)
    m = node_lat.shape[0]
    if m < 3:
        return expand_node_order(np.arange(m), names), None
    from rankopt.solvers.solve import solve

    opts = dict(solve_options)
    if bandwidth is not None:
        opts["bandwidth"] = node_matrix(bandwidth, names, reduce=reduce)[0]
    workload = opts.get("workload")
    if opts.get("traffic") is not None or isinstance(workload, (str, os.PathLike)):
        from rankopt.solvers.spec import ModelSpec

        spec = ModelSpec(workload=workload, traffic=opts.get("traffic"))  # reads a file once
        if "workload" in opts:
            opts["workload"] = spec.workload
        if spec.traffic is not None:
            opts["traffic"] = node_traffic(spec.traffic, names)
    result = solve(node_lat, collective, algorithm, keep_rank0=keep_rank0, **opts)
    return expand_node_order(result.order, names), result
