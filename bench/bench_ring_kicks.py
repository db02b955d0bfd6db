"""Ring ILS: the cost of one kick, and the default solve against fast-tsp and LKH-3.

    python bench/bench_ring_kicks.py                      # kicks at 1024/4096/16384, quality at 1024/4096
    python bench/bench_ring_kicks.py --sections kicks --sizes 1024,4096
    python bench/bench_ring_kicks.py --sections quality --sizes 1024 --seeds 3
    python bench/bench_ring_kicks.py --sections flips --sizes 1024,4096,16384 --kinds uniform

Two kinds of symmetric matrix, float32:

* ``cloud``: a hierarchical cloud (4 pods x 16 racks x n/64 hosts; one-way
  latency 25 / 60 / 180 us within a rack / pod / across pods), a log-normal
  factor (sigma 0.05) on every link and 5 % noisy VMs whose links are 3x slower;
* ``uniform``: independent uniform [0, 1) weights, the hardest case for the
  array tour (long flips, no locality).

``kicks``: microseconds (CPU) per ILS kick of ``_ring_search.iterated_local_search``
from a local optimum (greedy-edge start, then local search; the default
solve's candidates: the alpha-nearest up to n = 4096 (``ring.alpha_neighbors``),
else the 10 nearest, and its kick type, walk and Lin-Kernighan move
(``ring.kick_type``, ``ring.kick_walk``, ``ring.kick_move``): on uniform weights candidate
kicks mixed with double bridges up to n = 2048, candidate kicks above, repaired
by 5-opt steps, with full passes every n / 8 kicks, whose time counts in the
kicks; those kicks search the weights penalised by the alpha-nearness ascent,
``ring.penalised_weights``, unless ``--raw``),
``min(default_kicks(n), --kicks)`` kicks, median over the seeds. ``--raw`` runs
every section on the raw weights (``ring.PENALISED_SEARCH`` off), as before the
penalised search.

``flips``: the same kicks (``kicks``' settings, the first seed's matrix and start)
with the k-opt chain's moves made on the array tour (``virtual_n`` huge: every
flip made, and taken back when the chain does not gain) and on the virtual tour
(``virtual_n`` 0: runs of the unchanged array, only a chain that gains made on
it, ``_ring_vtour``), alternated ``--seeds`` times in one process; CPU
microseconds per kick, medians, and whether the two gave the same ring (they
must: only the representation differs). The default switches at
``KOPT_VIRTUAL_N`` processes.

``quality``: ``rankopt.solve(lat)`` (the default: ``ils`` with its default
kicks) against ``fast_tsp`` for ``--seconds`` (1 s) and for the same time as
rankopt, ``elkai`` (LKH-3, runs=1) up to ``--lkh-max``, and LKH-3 with a
``TOTAL_TIME_LIMIT`` of ``--seconds`` and of rankopt's time; also rankopt given
``--seconds`` (``time_limit`` and unbounded kicks). Each cell: length over the best
ring any solver found on that matrix, and CPU time (``time.process_time``;
every solver here runs on one thread, and fast-tsp's own budget is CPU time
too); median over the seeds.
fast_tsp and elkai are optional (``pip install fast-tsp elkai``); without
them their columns are skipped.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np

import rankopt
from rankopt.models import make_model
from rankopt.solvers import _ring_search, ring
from rankopt.solvers._ring_search import KOPT_VIRTUAL_N
from rankopt.solvers.ring import (
    ALPHA_MAX_N,
    ALPHA_SPARSE,
    BRIDGE_SHARE,
    DEFAULT_NEIGHBORS,
    DEFAULT_WINDOW,
    KOPT_STEPS,
    alpha_neighbors,
    candidate_lists,
    default_kicks,
    greedy_ring,
    kick_move,
    kick_type,
    kick_walk,
    pass_every,
    penalised_weights,
    penalty_iterations,
)

#: ``virtual_n`` that keeps every chain's flips on the array tour
ARRAY_FLIPS = 10**12
LEVELS = (2.5e-5, 6e-5, 1.8e-4)  # same rack, same pod, across pods (s)


def cloud_matrix(n: int, seed: int = 0) -> np.ndarray:
    """Symmetric hierarchical cloud latency (float32): see the module docstring."""
    g = np.random.default_rng(seed)
    hosts = max(n // 64, 1)
    rack = g.permutation(n) // hosts  # shuffled launch order
    pod = rack // 16
    slow = np.where(g.random(n) < 0.05, 3.0, 1.0).astype(np.float32)
    lat = np.empty((n, n), dtype=np.float32)
    for i in range(0, n, 1024):
        s = slice(i, min(i + 1024, n))
        base = np.where(
            rack[s, None] == rack[None, :],
            LEVELS[0],
            np.where(pod[s, None] == pod[None, :], LEVELS[1], LEVELS[2]),
        )
        lat[s] = base * np.maximum(slow[s, None], slow[None, :])
    # a symmetric log-normal factor on every link
    for i in range(0, n, 1024):
        s = slice(i, min(i + 1024, n))
        f = np.exp(0.05 * g.standard_normal((s.stop - s.start, n))).astype(np.float32)
        lat[s] *= f
    upper = np.triu_indices(n, 1) if n <= 4096 else None
    if upper is not None:
        lat[upper[1], upper[0]] = lat[upper]
    else:
        for i in range(0, n, 1024):
            s = slice(i, min(i + 1024, n))
            lat[s, : s.start] = lat[: s.start, s].T
            blk = lat[s, s]
            lat[s, s] = np.triu(blk) + np.triu(blk, 1).T
    np.fill_diagonal(lat, 0.0)
    return lat


def uniform_matrix(n: int, seed: int = 0) -> np.ndarray:
    """Symmetric matrix of independent uniform [0, 1) weights (float32)."""
    g = np.random.default_rng(seed)
    lat = g.random((n, n), dtype=np.float32)
    for i in range(0, n, 1024):
        s = slice(i, min(i + 1024, n))
        lat[s, : s.start] = lat[: s.start, s].T
        blk = lat[s, s]
        lat[s, s] = np.triu(blk) + np.triu(blk, 1).T
    np.fill_diagonal(lat, 0.0)
    return lat


MATRICES: dict[str, Callable[[int, int], np.ndarray]] = {
    "cloud": cloud_matrix,
    "uniform": uniform_matrix,
}


def kick_start(w: np.ndarray) -> tuple[np.ndarray, np.ndarray, int, np.ndarray]:
    """The default solve's candidates, its local optimum from the greedy start, its kick
    type and the weights its kicks search: with candidate or mixed kicks (alpha
    candidates) the penalised weights (``ring.penalised_weights``) and the candidates
    sorted by them, the tour a local optimum on them too, else ``w``."""
    n = w.shape[0]
    alpha = n <= ALPHA_MAX_N
    k = alpha_neighbors(n) if alpha else DEFAULT_NEIGHBORS
    nb = candidate_lists(w, k, "alpha" if alpha else "nearest")
    tour = greedy_ring(w, nb)
    _ring_search.local_search(w, tour, nb)
    kick = kick_type(w, tour, DEFAULT_WINDOW)
    ws = w
    if kick and alpha and ring.PENALISED_SEARCH:
        nbp, pi, _ = _ring_search.alpha_candidates(w, k, penalty_iterations(n), ALPHA_SPARSE)
        if np.any(pi):
            ws, nb = penalised_weights(w, pi, nbp)
            _ring_search.local_search(ws, tour, nb)
    return nb, tour, kick, ws


def kick_cost(
    w: np.ndarray, kicks: int, seed: int, start=None, virtual_n: int = -1
) -> tuple[float, int]:
    """CPU microseconds per kick of the ILS kernel from a local optimum, and the kicks run
    (``start``: ``kick_start(w)``, computed here when not given; the tour is not changed)."""
    n = w.shape[0]
    nb, tour, kick, ws = kick_start(w) if start is None else start
    tour = tour.copy()
    kicks = min(kicks, default_kicks(n))
    t = time.process_time()
    accept = kick_walk(n, kick)
    done = _ring_search.iterated_local_search(
        ws,
        tour,
        nb,
        seed,
        kicks,
        0.0,
        DEFAULT_WINDOW,
        None,
        0,
        0.0,
        kick,
        accept,
        BRIDGE_SHARE,
        pass_every(n, kick),
        1,
        1,
        kick_move(kick),
        KOPT_STEPS,
        virtual_n,
    )[3]
    return (time.process_time() - t) / max(done, 1) * 1e6, done


def flip_costs(w: np.ndarray, kicks: int, rounds: int, seed: int) -> tuple[float, float, bool]:
    """CPU microseconds per kick with the chain's flips on the array and on the virtual
    tour (medians of ``rounds`` alternations), and whether both made the same ring."""
    start = kick_start(w)
    times: dict[int, list[float]] = {ARRAY_FLIPS: [], 0: []}
    for r in range(rounds):
        for virtual_n in (ARRAY_FLIPS, 0) if r % 2 == 0 else (0, ARRAY_FLIPS):
            times[virtual_n].append(kick_cost(w, kicks, seed, start, virtual_n)[0])
    same = np.array_equal(
        _ring_after(w, kicks, seed, start, 0), _ring_after(w, kicks, seed, start, ARRAY_FLIPS)
    )
    return float(np.median(times[ARRAY_FLIPS])), float(np.median(times[0])), same


def _ring_after(w, kicks, seed, start, virtual_n):
    """The ring the timed kicks end at (run once more, untimed)."""
    nb, tour, kick, ws = start
    t = tour.copy()
    n = w.shape[0]
    _ring_search.iterated_local_search(
        ws, t, nb, seed, min(kicks, default_kicks(n)), 0.0, DEFAULT_WINDOW, None, 0, 0.0, kick,
        kick_walk(n, kick), BRIDGE_SHARE, pass_every(n, kick), 1, 1, kick_move(kick),
        KOPT_STEPS, virtual_n,
    )  # fmt: skip
    return t


def _int_matrix(w: np.ndarray, top: int) -> list[list[int]]:
    return np.round(w.astype(np.float64) * (top / float(w.max()))).astype(np.int64).tolist()


def ext_fast_tsp(w: np.ndarray, seconds: float) -> tuple[np.ndarray, float] | None:
    """fast-tsp's ring and the CPU time of its call (not of the integer conversion)."""
    try:
        import fast_tsp
    except ImportError:
        return None
    d = _int_matrix(w, 65535)
    t = time.process_time()
    tour = fast_tsp.find_tour(d, duration_seconds=seconds)
    return np.array(tour), time.process_time() - t


def lkh_problem(w: np.ndarray) -> str:
    """``w`` as LKH-3's problem text (integers, TSPLIB's full matrix): built once per
    matrix, for every LKH-3 column."""
    d = _int_matrix(w, 10**7)
    return (
        f"TYPE : TSP\nDIMENSION : {w.shape[0]}\nEDGE_WEIGHT_TYPE : EXPLICIT\n"
        "EDGE_WEIGHT_FORMAT : FULL_MATRIX\nEDGE_WEIGHT_SECTION\n"
        + "\n".join(" ".join(map(str, row)) for row in d)
        + "\n"
    )


def ext_elkai(
    w: np.ndarray, seconds: float | None = None, problem: str | None = None
) -> tuple[np.ndarray | None, float] | None:
    """LKH-3's ring (one run) and the CPU time of its call, through elkai's parameter text
    (``elkai._elkai.solve_problem``, which ``elkai.DistanceMatrix`` calls with ``RUNS``
    only); with ``seconds``, LKH-3's ``TOTAL_TIME_LIMIT`` (the whole run, its ascent
    included), and the ring ``None`` when the limit ended before LKH-3 had one.
    ``problem``: ``lkh_problem(w)`` if the caller has it."""
    try:
        from elkai import _elkai
    except ImportError:
        return None
    n = w.shape[0]
    problem = lkh_problem(w) if problem is None else problem
    params = "RUNS = 1\nPROBLEM_FILE = :stdin:\n"
    if seconds is not None:
        params += f"TOTAL_TIME_LIMIT = {seconds:.3f}\n"
    t = time.process_time()
    tour = np.array(_elkai.solve_problem(params, problem), dtype=np.int64) - 1
    dt = time.process_time() - t
    # a limit that ends before LKH-3's first ring (its ascent included) gives an empty tour
    return (tour if np.array_equal(np.sort(tour), np.arange(n)) else None), dt


def quality(
    w: np.ndarray, seed: int, lkh_max: int, seconds: float = 1.0
) -> dict[str, tuple[float, float]]:
    """Ring length and CPU time of each solver on ``w``."""
    model = make_model(w)
    out: dict[str, tuple[float, float]] = {}

    def ext(name: str, f: Callable[[], tuple[np.ndarray | None, float] | None]) -> None:
        got = f()
        if got is not None:  # no ring within its limit: an infinite length
            out[name] = (np.inf if got[0] is None else model.cost(got[0]), got[1])

    t = time.process_time()
    r = rankopt.solve(w, rng=seed)
    t_default = time.process_time() - t
    out["rankopt default"] = (r.cost, t_default)
    t = time.process_time()
    r = rankopt.solve(w, method="ils", rng=seed, time_limit=seconds, max_iter=10**9)
    out[f"rankopt {seconds:g}s"] = (r.cost, time.process_time() - t)
    ext(f"fast_tsp {seconds:g}s", lambda: ext_fast_tsp(w, seconds))
    ext("fast_tsp same time", lambda: ext_fast_tsp(w, t_default))
    try:
        import elkai  # noqa: F401
    except ImportError:
        return out
    problem = lkh_problem(w)
    if w.shape[0] <= lkh_max:
        ext("LKH-3 runs=1", lambda: ext_elkai(w, problem=problem))
    ext(f"LKH-3 {seconds:g}s", lambda: ext_elkai(w, seconds, problem))
    ext("LKH-3 same time", lambda: ext_elkai(w, t_default, problem))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sections", default="kicks,quality")
    ap.add_argument("--sizes", default=None, help="comma-separated n (kicks: 1024,4096,16384)")
    ap.add_argument("--kinds", default="cloud,uniform")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--kicks", type=int, default=3000, help="at most this many kicks timed")
    ap.add_argument("--lkh-max", type=int, default=1024, help="largest n given to LKH-3")
    ap.add_argument("--seconds", type=float, default=1.0, help="the time limit of the 'Ns' columns")
    ap.add_argument(
        "--raw", action="store_true", help="search the raw weights (PENALISED_SEARCH off)"
    )
    args = ap.parse_args(argv)
    if args.raw:
        ring.PENALISED_SEARCH = False
    sections = set(args.sections.split(","))
    kinds = args.kinds.split(",")
    if "kicks" in sections:
        sizes = [int(s) for s in (args.sizes or "1024,4096,16384").split(",")]
        print("| matrix | n | kicks | us per kick (median) | per seed |")
        print("|---|---|---|---|---|")
        for n in sizes:
            for kind in kinds:
                runs = [kick_cost(MATRICES[kind](n, s), args.kicks, s) for s in range(args.seeds)]
                us = [u for u, _ in runs]
                print(
                    f"| {kind} | {n} | {runs[0][1]} | {np.median(us):.1f} | "
                    + ", ".join(f"{u:.1f}" for u in us)
                    + " |",
                    flush=True,
                )
    if "flips" in sections:
        sizes = [int(s) for s in (args.sizes or "1024,4096,16384").split(",")]
        print(f"(the default uses the virtual tour from KOPT_VIRTUAL_N = {KOPT_VIRTUAL_N})")
        print(
            "| matrix | n | kicks | us per kick, array flips | virtual tour | ratio | same ring |"
        )
        print("|---|---|---|---|---|---|---|")
        for n in sizes:
            for kind in kinds:
                kicks = min(args.kicks, default_kicks(n))
                arr, vt, same = flip_costs(MATRICES[kind](n, 0), kicks, max(args.seeds, 2), 0)
                print(
                    f"| {kind} | {n} | {kicks} | {arr:.1f} | {vt:.1f} | {arr / vt:.2f}x | "
                    f"{'yes' if same else 'NO'} |",
                    flush=True,
                )
    if "quality" in sections:
        sizes = [int(s) for s in (args.sizes or "1024,4096").split(",")]
        for n in sizes:
            for kind in kinds:
                rows: dict[str, list[tuple[float, float]]] = {}
                for s in range(args.seeds):
                    res = quality(MATRICES[kind](n, 100 + s), s, args.lkh_max, args.seconds)
                    best = min(c for c, _ in res.values())
                    for k, (c, t) in res.items():
                        rows.setdefault(k, []).append((c / best, t))
                cells = [
                    f"{k}: {np.median([r for r, _ in v]):.4f} / {np.median([t for _, t in v]):.2f}s"
                    for k, v in rows.items()
                ]
                print(f"| {kind} | {n} | " + " | ".join(cells) + " |", flush=True)
    return 0


def test_kick_cost_and_matrices_smoke():
    """The helpers at a tiny size (the benchmark itself is the script)."""
    for kind, f in MATRICES.items():
        w = f(128, 0)
        assert w.dtype == np.float32 and np.array_equal(w, w.T), kind
        assert (np.diag(w) == 0).all() and (w[~np.eye(128, dtype=bool)] > 0).all()
        us, done = kick_cost(w, 20, 0)
        assert done == 20 and us > 0
    arr, vt, same = flip_costs(MATRICES["uniform"](128, 0), 20, 2, 0)
    assert arr > 0 and vt > 0 and same


if __name__ == "__main__":
    raise SystemExit(main())
