"""Side-by-side: rankopt's methods against external TSP / QAP solvers.

Runs every solver that is installed on the same instances and prints one
Markdown table (cost ratio to the best found, wall time): synthetic clouds,
the real latency matrices and TSPLIB instances in ``shared/data``, and the
step-based allreduce algorithms against ``scipy.optimize.quadratic_assignment``.

    python bench/compare.py                 # everything (minutes: LKH at n=1024)
    python bench/compare.py --quick         # small instances only
    python bench/compare.py --sections qap  # one section

External solvers (each optional): ``elkai`` (LKH-3, runs=1), ``fast_tsp``
(1 s), ``python_tsp`` (local search, n <= 256), ``ortools`` (guided local
search, 10 s), ``scipy.optimize.quadratic_assignment`` (FAQ, best of 5).
Integer solvers get the symmetrised matrix scaled to integers; every tour is
scored with rankopt's model of the original matrix, in its better direction.
For an asymmetric matrix LKH-3 also runs on the directed matrix ("LKH
directed", its asymmetric-TSP transformation, twice the nodes).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

import rankopt
from rankopt.models import make_model

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
from _tsplib import read_optima, read_tsplib  # noqa: E402

DATA = HERE.parent.parent / "shared" / "data"


def _int_matrix(w: np.ndarray, top: int) -> list[list[int]]:
    return np.round(w * (top / w.max())).astype(np.int64).tolist()


def ext_fast_tsp(w: np.ndarray) -> np.ndarray:
    import fast_tsp

    return np.array(fast_tsp.find_tour(_int_matrix(w, 65535), duration_seconds=1.0))


def ext_elkai(w: np.ndarray) -> np.ndarray:
    import elkai

    tour = elkai.DistanceMatrix(_int_matrix(w, 10**7)).solve_tsp(runs=1)
    return np.array(tour[:-1] if len(tour) > w.shape[0] else tour)


def ext_python_tsp(w: np.ndarray) -> np.ndarray:
    from python_tsp.heuristics import solve_tsp_local_search

    tour, _ = solve_tsp_local_search(w)
    return np.array(tour)


def ext_ortools(w: np.ndarray) -> np.ndarray:
    from ortools.constraint_solver import pywrapcp, routing_enums_pb2

    d = _int_matrix(w, 10**6)
    n = len(d)
    mgr = pywrapcp.RoutingIndexManager(n, 1, 0)
    routing = pywrapcp.RoutingModel(mgr)
    cb = routing.RegisterTransitCallback(lambda i, j: d[mgr.IndexToNode(i)][mgr.IndexToNode(j)])
    routing.SetArcCostEvaluatorOfAllVehicles(cb)
    p = pywrapcp.DefaultRoutingSearchParameters()
    p.first_solution_strategy = routing_enums_pb2.FirstSolutionStrategy.PATH_CHEAPEST_ARC
    p.local_search_metaheuristic = routing_enums_pb2.LocalSearchMetaheuristic.GUIDED_LOCAL_SEARCH
    p.time_limit.seconds = 10
    sol = routing.SolveWithParameters(p)
    idx, tour = routing.Start(0), []
    while not routing.IsEnd(idx):
        tour.append(mgr.IndexToNode(idx))
        idx = sol.Value(routing.NextVar(idx))
    return np.array(tour)


EXTERNAL: dict[str, tuple[Callable[[np.ndarray], np.ndarray], int]] = {
    # name -> (solver, largest n it is run on)
    "fast_tsp 1s": (ext_fast_tsp, 4096),
    "LKH (elkai runs=1)": (ext_elkai, 1100),
    "OR-Tools GLS 10s": (ext_ortools, 1100),
    "python-tsp LS": (ext_python_tsp, 130),
}
OURS = ["ils", "two_opt", "anneal", "greedy_cluster"]


def _timed(f: Callable[[], np.ndarray]) -> tuple[np.ndarray | None, float]:
    t = time.perf_counter()
    try:
        out = f()
    except ImportError:
        return None, 0.0
    return out, time.perf_counter() - t


def ring_rows(name: str, lat: np.ndarray, optimum: float | None, externals: bool) -> list[str]:
    model = make_model(lat)
    w = model.ring_weights
    n = model.n
    res: dict[str, tuple[float, float]] = {}
    for m in OURS:
        if m == "greedy_cluster" and n > 4096:
            continue
        t = time.perf_counter()
        r = rankopt.solve(lat, method=m, rng=0)
        res[f"rankopt {m}"] = (r.cost, time.perf_counter() - t)
    if externals:
        asymmetric = not getattr(model, "symmetric", True)
        for ext, (f, nmax) in EXTERNAL.items():
            if n <= nmax:
                tour, dt = _timed(lambda f=f: f(w))
                if tour is not None:
                    # symmetric solvers: their ring in its better direction
                    res[ext] = (min(model.cost(tour), model.cost(tour[::-1].copy())), dt)
        if asymmetric and n <= EXTERNAL["LKH (elkai runs=1)"][1]:
            # LKH-3 takes an asymmetric matrix through its ATSP transformation
            tour, dt = _timed(lambda: ext_elkai(model.latency))
            if tour is not None:
                res["LKH directed (elkai runs=1)"] = (model.cost(tour), dt)
    ref = optimum if optimum is not None else min(c for c, _ in res.values())
    cells = [f"{c / ref:.4f} / {t:.2f}s" for c, t in res.values()]
    return [
        f"| {name} | {n} | "
        + " | ".join(f"{k}: {v}" for k, v in zip(res, cells, strict=True))
        + " |"
    ]


def qap_rows(n_hosts: tuple[int, int, int, int], nbytes: float) -> list[str]:
    from scipy.optimize import quadratic_assignment

    c = rankopt.synthetic_cloud(*n_hosts, rng=2)
    lat, bw = c.latency, c.bandwidth
    rows = []
    for alg in ["recursive_doubling", "rabenseifner"]:
        model = make_model(lat, "allreduce", alg, bandwidth=bw, nbytes=nbytes)
        s = model.schedule
        flow = np.zeros((c.n, c.n))
        for k in range(len(s.repeat)):
            e = slice(s.step_ptr[k], s.step_ptr[k + 1])
            np.add.at(flow, (s.src[e], s.dst[e]), s.frac[e] * s.repeat[k])
        dist = lat + nbytes / np.where(bw > 0, bw, np.inf)
        np.fill_diagonal(dist, 0.0)
        t = time.perf_counter()
        faq = min(
            model.cost(
                quadratic_assignment(
                    flow,
                    dist,
                    method="faq",
                    options={"rng": np.random.default_rng(k), "P0": "randomized"},
                ).col_ind
            )
            for k in range(5)
        )
        t_faq = time.perf_counter() - t
        base = model.cost(np.arange(c.n))
        cells = [f"launch order {base / faq:.3f}", f"FAQ best of 5: 1.000 / {t_faq:.2f}s"]
        for m in ["greedy_cluster", "auto"]:
            t = time.perf_counter()
            r = rankopt.solve(lat, "allreduce", alg, bandwidth=bw, nbytes=nbytes, method=m, rng=0)
            cells.append(f"rankopt {m}: {r.cost / faq:.3f} / {time.perf_counter() - t:.2f}s")
        rows.append(f"| allreduce {alg} | {c.n} | " + " | ".join(cells) + " |")
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small instances only")
    ap.add_argument("--sections", default="synthetic,real,tsplib,qap")
    ap.add_argument("--no-external", action="store_true")
    args = ap.parse_args(argv)
    sections = set(args.sections.split(","))
    ext = not args.no_external
    print("| instance | n | method: cost ratio (to optimum or best found) / wall time |")
    print("|---|---|---|")
    if "synthetic" in sections:
        shapes = [(2, 2, 4, 4), (2, 4, 8, 4)] + (
            [] if args.quick else [(4, 8, 8, 4), (4, 8, 16, 8)]
        )
        for shape in shapes:
            c = rankopt.synthetic_cloud(*shape, rng=1)
            print(
                *ring_rows(f"synthetic cloud {shape}", c.latency, None, ext), sep="\n", flush=True
            )
    if "real" in sections and DATA.exists():
        for rel in [
            "aws_cloudping/aws_cloudping_p50_ms.npy",
            "azure/azure_rtt_p95_ms.npy",
            "ripe_atlas_country/ripe_atlas_country_rtt_avg_dense97_ms.npy",
            "planetlab490/planetlab490_t1_ms.npy",
        ]:
            lat = rankopt.load_matrix(DATA / "latency" / rel, unit="ms")
            print(*ring_rows(Path(rel).stem, lat, None, ext), sep="\n", flush=True)
    if "tsplib" in sections and DATA.exists():
        opt = read_optima(DATA / "optima.csv")
        names = ["eil51", "kroA100", "ch150", "tsp225"] + (
            [] if args.quick else ["pcb442", "att532", "gr666", "pr1002", "u1060"]
        )
        for name in names:
            d = read_tsplib(DATA / "tsplib" / f"{name}.tsp")
            print(*ring_rows(f"TSPLIB {name}", d, opt[name], ext), sep="\n", flush=True)
    if "qap" in sections:
        print(*qap_rows((2, 4, 8, 4), float(1 << 24)), sep="\n", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
