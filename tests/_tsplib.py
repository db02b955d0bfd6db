"""TSPLIB helpers for tests and benchmarks: instances, optima, opt.tour files.

Distances come from :func:`rankopt.network.tsplib.read_tsplib` (TSPLIB's integer
rounding, so tour lengths compare with the published optima).
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from rankopt.network.tsplib import read_tsplib as _read_tsplib

__all__ = ["read_tsplib", "read_optima", "read_opt_tour", "tour_length"]


def read_tsplib(path: str | Path) -> NDArray[np.float64]:
    """Distance matrix of a TSPLIB instance."""
    return _read_tsplib(path)[1]


def read_optima(path: str | Path) -> dict[str, float]:
    """``instance -> optimum`` for the TSP rows of ``optima.csv``."""
    with open(path, newline="") as f:
        return {
            r["instance"]: float(r["optimum"]) for r in csv.DictReader(f) if r["kind"] == "tsp_opt"
        }


def read_opt_tour(path: str | Path) -> NDArray[np.int64]:
    """A TSPLIB ``.opt.tour`` file as a 0-based order."""
    toks = Path(path).read_text().split("TOUR_SECTION")[1].split()
    return np.array([int(x) - 1 for x in toks if x.lstrip("-").isdigit() and int(x) > 0])


def tour_length(d: NDArray[np.float64], order: NDArray[np.int64]) -> float:
    """Length of the closed tour ``order`` under ``d``."""
    o = np.asarray(order)
    return float(d[o, np.roll(o, -1)].sum())
