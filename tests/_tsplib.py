"""A small TSPLIB reader for tests and benchmarks (EUC_2D, ATT, GEO, EXPLICIT).

Distances follow the TSPLIB specification exactly (integer-rounded), so tour
lengths can be compared with the published optima.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

__all__ = ["read_tsplib", "read_optima", "tour_length"]

_PI = 3.141592  # TSPLIB's value, needed to reproduce the GEO optima


def _header_and_body(path: Path) -> tuple[dict[str, str], dict[str, list[str]]]:
    header: dict[str, str] = {}
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line == "EOF":
            continue
        key = line.split(":")[0].strip().upper()
        if key.endswith("_SECTION"):
            current = sections.setdefault(key, [])
            continue
        if ":" in line and current is None or (":" in line and key.isupper() and key.isalpha()):
            k, _, v = line.partition(":")
            header[k.strip().upper()] = v.strip()
            current = None
            continue
        if current is not None:
            current.extend(line.split())
    return header, sections


def _coords(tokens: list[str], n: int) -> NDArray[np.float64]:
    a = np.array(tokens[: 3 * n], dtype=float).reshape(n, 3)
    return a[:, 1:]


def _geo(xy: NDArray[np.float64]) -> NDArray[np.float64]:
    deg = np.trunc(xy)
    rad = _PI * (deg + 5.0 * (xy - deg) / 3.0) / 180.0
    lat, lon = rad[:, 0], rad[:, 1]
    q1 = np.cos(lon[:, None] - lon[None, :])
    q2 = np.cos(lat[:, None] - lat[None, :])
    q3 = np.cos(lat[:, None] + lat[None, :])
    arg = np.clip(0.5 * ((1.0 + q1) * q2 - (1.0 - q1) * q3), -1.0, 1.0)
    return np.floor(6378.388 * np.arccos(arg) + 1.0)


def _explicit(tokens: list[str], n: int, fmt: str) -> NDArray[np.float64]:
    vals = np.array(tokens, dtype=float)
    d = np.zeros((n, n))
    if fmt == "FULL_MATRIX":
        return vals[: n * n].reshape(n, n)
    if fmt == "UPPER_ROW":
        iu = np.triu_indices(n, 1)
    elif fmt == "LOWER_DIAG_ROW":
        iu = np.tril_indices(n, 0)
    elif fmt == "UPPER_DIAG_ROW":
        iu = np.triu_indices(n, 0)
    elif fmt == "LOWER_ROW":
        iu = np.tril_indices(n, -1)
    else:
        raise ValueError(f"unsupported EDGE_WEIGHT_FORMAT {fmt!r}")
    if fmt.startswith("LOWER"):
        # row-major over the lower triangle = column-major over the upper one
        rows, cols = iu
        order = np.lexsort((cols, rows))
        d[rows[order], cols[order]] = vals[: len(rows)]
    else:
        d[iu] = vals[: len(iu[0])]
    d = np.maximum(d, d.T)
    np.fill_diagonal(d, 0.0)
    return d


def read_tsplib(path: str | Path) -> NDArray[np.float64]:
    """Integer distance matrix (as float64) of a symmetric TSPLIB ``.tsp`` file."""
    header, sections = _header_and_body(Path(path))
    n = int(header["DIMENSION"])
    kind = header["EDGE_WEIGHT_TYPE"]
    if kind == "EXPLICIT":
        d = _explicit(sections["EDGE_WEIGHT_SECTION"], n, header["EDGE_WEIGHT_FORMAT"])
    else:
        xy = _coords(sections["NODE_COORD_SECTION"], n)
        if kind == "GEO":
            d = _geo(xy)
        else:
            diff = xy[:, None, :] - xy[None, :, :]
            sq = (diff**2).sum(-1)
            if kind == "EUC_2D":
                d = np.floor(np.sqrt(sq) + 0.5)
            elif kind == "ATT":
                r = np.sqrt(sq / 10.0)
                t = np.floor(r + 0.5)
                d = np.where(t < r, t + 1.0, t)
            elif kind == "CEIL_2D":
                d = np.ceil(np.sqrt(sq))
            else:
                raise ValueError(f"unsupported EDGE_WEIGHT_TYPE {kind!r}")
    np.fill_diagonal(d, 0.0)
    return np.ascontiguousarray(d, dtype=np.float64)


def read_optima(path: str | Path) -> dict[str, float]:
    """``instance -> optimum`` for the TSP rows of ``optima.csv``."""
    with open(path, newline="") as f:
        return {
            r["instance"]: float(r["optimum"]) for r in csv.DictReader(f) if r["kind"] == "tsp_opt"
        }


def tour_length(d: NDArray[np.float64], order: NDArray[np.int64]) -> float:
    """Length of the closed tour ``order`` under ``d``."""
    o = np.asarray(order)
    return float(d[o, np.roll(o, -1)].sum())


if __name__ == "__main__":  # pragma: no cover - quick self-check of the reader
    import sys

    root = Path(sys.argv[1])
    opt = read_optima(root / "optima.csv")
    for name in sorted(opt, key=lambda s: int("".join(filter(str.isdigit, s)))):
        tour_file = root / "tsplib" / f"{name}.opt.tour"
        if tour_file.exists():
            d = read_tsplib(root / "tsplib" / f"{name}.tsp")
            toks = tour_file.read_text().split("TOUR_SECTION")[1].split()
            t = [int(x) - 1 for x in toks if x.lstrip("-").isdigit() and int(x) > 0]
            print(
                name,
                tour_length(d, np.array(t)),
                opt[name],
                math.isclose(tour_length(d, np.array(t)), opt[name]),
            )
