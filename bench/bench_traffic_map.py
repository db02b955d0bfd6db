"""Process mapping side by side: rankopt ``map``, SharedMap and SciPy's FAQ.

    python bench/bench_traffic_map.py            # the table (a few minutes)
    python bench/bench_traffic_map.py --quick    # n <= 256, under a minute
    python -m pytest bench/bench_traffic_map.py  # smoke run (one small instance)

Every instance is the classic process-mapping objective, ``sum over (k, l) of
W[k, l] * D[order[k], order[l]]`` (each undirected edge counted both ways):
``W`` the traffic graph (unit weights), ``D`` a machine of ``n`` processing
elements in a hierarchy ``4:8:n/32`` (4 per group, 8 groups per node, n/32
nodes) with distances ``1:10:100``, as the SharedMap papers use. The graph's vertices are shuffled
(the launch order means nothing).

Solvers, each timed by the median of ``--repeat`` runs in this one process;
``rankopt`` and SharedMap run with seeds ``0 .. --seeds - 1``, and a cell is
the median cost and the median time over the seeds:

* ``rankopt``: ``rankopt.solve(D, traffic=Traffic.from_weights(W),
  method="map")`` end to end (the hierarchy detected from ``D``, the n^2
  matrix validated); without a ``traffic`` field in ``solve()``, the method
  on a :class:`~rankopt.models.traffic.TrafficModel`;
* ``SharedMap`` (PyPI ``chszlablib``, a benchmark-only anchor, skipped when
  absent): ``Decomposition.process_map(graph, [4, 8, n/32], [1, 10, 100],
  mode=..., imbalance=0.0)``, modes ``fast``, ``eco`` and ``strong``, one
  thread; its assignment is the order, priced by rankopt's model;
* ``FAQ``: ``scipy.optimize.quadratic_assignment(W, D, method="faq")``, the
  best of ``--faq-seeds`` randomised starts (time of all together, one run
  above n = 64: it takes seconds), up to n = 1,024.

Instances: 2-D (5-point) and 3-D (7-point) stencils, random geometric graphs
(unit square, radius ``0.55 sqrt(ln n / n)``, as DIMACS ``rgg_n_2_*``),
Delaunay triangulations of random points (as DIMACS ``delaunay_n*``, FEM-like
meshes: no Matrix Market files ship in shared/data), n = 64 to 4,096.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.sparse as sp

from rankopt.models.traffic import Traffic, TrafficModel

try:  # a benchmark-only anchor, not a dependency of rankopt
    import chszlablib
except ImportError:  # pragma: no cover - depends on the machine
    chszlablib = None

MODES = ("fast", "eco", "strong")
FAQ_MAX_N = 1024


# ---------------------------------------------------------------- instances
def stencil(*shape: int) -> Any:
    """Unit edges between the grid neighbours of ``shape`` (row-major vertices)."""
    n = int(np.prod(shape))
    idx = np.arange(n).reshape(shape)
    rows, cols = [], []
    for axis in range(len(shape)):
        rows.append(np.delete(idx, -1, axis=axis).ravel())
        cols.append(np.delete(idx, 0, axis=axis).ravel())
    return _graph(n, np.concatenate(rows), np.concatenate(cols))


def rgg(n: int, seed: int) -> Any:
    from scipy.spatial import cKDTree

    pts = np.random.default_rng(seed).uniform(size=(n, 2))
    pairs = cKDTree(pts).query_pairs(0.55 * np.sqrt(np.log(n) / n), output_type="ndarray")
    return _graph(n, pairs[:, 0], pairs[:, 1])


def delaunay(n: int, seed: int) -> Any:
    from scipy.spatial import Delaunay

    tri = Delaunay(np.random.default_rng(seed).uniform(size=(n, 2))).simplices
    e = np.concatenate([tri[:, [0, 1]], tri[:, [1, 2]], tri[:, [0, 2]]])
    return _graph(n, e[:, 0], e[:, 1])


def _graph(n: int, a: Any, b: Any) -> Any:
    w = sp.coo_array((np.ones(len(a)), (a, b)), shape=(n, n)).tocsr()
    w = w + w.T
    w.data[:] = 1.0
    return sp.csr_array(w)


def shuffled(w: Any, seed: int) -> Any:
    p = np.random.default_rng(seed).permutation(w.shape[0])
    return sp.csr_array(w[p][:, p])


def machine(n: int) -> tuple[list[int], Any]:
    """Hierarchy ``4:8:n/32`` and its distance matrix (1 : 10 : 100)."""
    hier = [4, 8, n // 32]
    pe = np.arange(n)
    d = np.full((n, n), 100.0)
    d[pe[:, None] // 32 == pe[None, :] // 32] = 10.0
    d[pe[:, None] // 4 == pe[None, :] // 4] = 1.0
    np.fill_diagonal(d, 0.0)
    return hier, d


def instances(quick: bool) -> list[tuple[str, Callable[[], Any]]]:
    out: list[tuple[str, Callable[[], Any]]] = [
        ("grid2d 8x8", lambda: stencil(8, 8)),
        ("grid3d 4x4x4", lambda: stencil(4, 4, 4)),
        ("grid2d 16x16", lambda: stencil(16, 16)),
        ("rgg 256", lambda: rgg(256, 1)),
        ("delaunay 256", lambda: delaunay(256, 1)),
    ]
    if not quick:
        out += [
            ("grid3d 8x8x8", lambda: stencil(8, 8, 8)),
            ("grid2d 32x32", lambda: stencil(32, 32)),
            ("rgg 1024", lambda: rgg(1024, 2)),
            ("delaunay 1024", lambda: delaunay(1024, 2)),
            ("grid2d 64x64", lambda: stencil(64, 64)),
            ("grid3d 16x16x16", lambda: stencil(16, 16, 16)),
            ("rgg 4096", lambda: rgg(4096, 3)),
            ("delaunay 4096", lambda: delaunay(4096, 3)),
        ]
    return out


# ---------------------------------------------------------------- solvers
def _timed(fn: Callable[[], Any], repeat: int) -> tuple[Any, float]:
    times, out = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return out, statistics.median(times)


def run_rankopt(w: Any, d: Any, seed: int) -> Any:
    import rankopt
    from rankopt.solvers.spec import MODEL_FIELDS

    t = Traffic.from_weights(w)
    if "traffic" in MODEL_FIELDS:
        return rankopt.solve(d, traffic=t, method="map", rng=seed).order
    from rankopt.solvers import METHODS
    from rankopt.solvers._base import SolveContext

    ctx = SolveContext(gen=np.random.default_rng(seed), seed=seed)
    return METHODS["map"].fn(TrafficModel(d, t), ctx).order


def run_sharedmap(w: Any, hier: list[int], mode: str, seed: int) -> Any:
    from chszlablib import Decomposition, Graph

    g = Graph.from_csr(
        w.indptr.astype(np.int64), w.indices.astype(np.int64),
        edge_weights=np.rint(w.data).astype(np.int64),
    )  # fmt: skip
    r = Decomposition.process_map(g, hier, [1, 10, 100], mode=mode, imbalance=0.0, seed=seed)
    return np.asarray(r.assignment, dtype=np.int64)


def run_faq(w: Any, d: Any, seeds: int) -> Any:
    from scipy.optimize import quadratic_assignment

    a = w.toarray()
    best, best_cost = None, np.inf
    for s in range(seeds):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = quadratic_assignment(a, d, method="faq", options={"rng": s, "P0": "randomized"})
        if r.fun < best_cost:
            best, best_cost = r.col_ind, r.fun
    return np.asarray(best, dtype=np.int64)


def _seeded(
    fn: Callable[[int], Any], priced: Callable[[Any], float], repeat: int, seeds: int
) -> tuple[float, float]:
    """Median cost and median time of ``fn(seed)`` over ``seeds`` seeds."""
    runs = [_timed(functools.partial(fn, s), repeat) for s in range(seeds)]
    return (
        statistics.median(priced(o) for o, _ in runs),
        statistics.median(t for _, t in runs),
    )


def bench_row(
    name: str, w: Any, repeat: int, faq_seeds: int, sharedmap: bool = True, seeds: int = 1
) -> dict[str, Any]:
    n = w.shape[0]
    hier, d = machine(n)
    model = TrafficModel(d, Traffic.from_weights(w))

    def priced(order: Any) -> float:
        o = np.asarray(order, dtype=np.int64)
        if sorted(o.tolist()) != list(range(n)):
            return float("nan")  # not one rank per processing element
        return float(model.cost(o))

    row: dict[str, Any] = {"instance": name, "n": n}
    row["rankopt"] = _seeded(lambda s: run_rankopt(w, d, s), priced, repeat, seeds)
    if sharedmap and chszlablib is not None:
        for mode in MODES:
            run_mode = functools.partial(run_sharedmap, w, hier, mode)
            row[f"SharedMap {mode}"] = _seeded(run_mode, priced, repeat, seeds)
    if n <= FAQ_MAX_N and faq_seeds > 0:
        order, t = _timed(lambda: run_faq(w, d, faq_seeds), 1 if n > 64 else repeat)
        row["FAQ"] = (priced(order), t)
    return row


def table(rows: list[dict[str, Any]]) -> str:
    cols = ["rankopt"] + [f"SharedMap {m}" for m in MODES] + ["FAQ"]
    cols = [c for c in cols if any(c in r for r in rows)]
    head = ["instance", "n"] + [f"{c} {x}" for c in cols for x in ("cost", "s")]
    ratio = "SharedMap strong" in cols
    if ratio:
        head += ["rankopt/strong", "rankopt s / eco s"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [r["instance"], str(r["n"])]
        for c in cols:
            if c in r:
                cells += [f"{r[c][0]:.0f}", f"{r[c][1]:.3f}"]
            else:
                cells += ["-", "-"]
        if ratio:
            ours, strong = r["rankopt"], r.get("SharedMap strong")
            eco = r.get("SharedMap eco")
            cells.append(f"{ours[0] / strong[0]:.3f}" if strong else "-")
            cells.append(f"{ours[1] / eco[1]:.2f}" if eco else "-")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="n <= 256 only (under a minute)")
    p.add_argument("--repeat", type=int, default=3, help="runs per timing (median)")
    p.add_argument(
        "--faq-seeds", type=int, default=None, help="randomised FAQ starts (0: skip; 3, --quick 1)"
    )
    p.add_argument(
        "--seeds", type=int, default=1, help="seeds of rankopt and SharedMap (median cost)"
    )
    p.add_argument("--only", default=None, help="instances whose name contains this text")
    args = p.parse_args(argv)
    if args.faq_seeds is None:
        args.faq_seeds = 1 if args.quick else 3
    rows = []
    for k, (name, make) in enumerate(instances(args.quick)):
        if args.only is not None and args.only not in name:
            continue
        w = shuffled(make(), 100 + k)
        rows.append(bench_row(name, w, args.repeat, args.faq_seeds, seeds=args.seeds))
        print(table(rows[-1:]).splitlines()[-1], flush=True)
    if chszlablib is None:
        print("(chszlablib is not installed: no SharedMap columns)\n")
    print(table(rows))


def test_bench_traffic_map_smoke():
    """One small instance, every installed solver (no timed assertion)."""
    row = bench_row("grid2d 8x8", shuffled(stencil(8, 8), 1), repeat=1, faq_seeds=1)
    # 8x8 on 4:8:2: at most 64 edges inside groups of 4 and 104 inside halves of 32,
    # so at least 2 * (11200 - 9 * 64 - 90 * 104) = 2528
    assert 2528 <= row["rankopt"][0] < 2 * 11200
    assert "FAQ" in row
    text = table([row])
    assert text.count("\n") == 2


if __name__ == "__main__":
    main()
