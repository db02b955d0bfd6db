"""Reading symmetric TSPLIB instances (``.tsp``) as distance matrices.

Supported: ``EUC_2D``, ``CEIL_2D``, ``ATT``, ``GEO`` coordinates and
``EXPLICIT`` weights in ``FULL_MATRIX``, ``UPPER_ROW``, ``LOWER_ROW``,
``UPPER_DIAG_ROW`` and ``LOWER_DIAG_ROW`` layouts, with TSPLIB's integer
rounding rules (Reinelt, "TSPLIB 95", section 2). Useful for benchmarking the
ring solvers on instances with proven optima.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from rankopt._files import MAX_TEXT_BYTES, check_processes, open_regular
from rankopt._validation import RankoptInputError

__all__ = ["read_tsplib"]


def _nint(x: NDArray[np.float64]) -> NDArray[np.float64]:
    return np.floor(x + 0.5)


def _geo_radians(x: NDArray[np.float64]) -> NDArray[np.float64]:
    deg = np.trunc(x)
    return 3.141592 * (deg + 5.0 * (x - deg) / 3.0) / 180.0  # TSPLIB's PI, not math.pi


def _coords_matrix(kind: str, xy: NDArray[np.float64]) -> NDArray[np.float64]:
    dx = xy[:, None, 0] - xy[None, :, 0]
    dy = xy[:, None, 1] - xy[None, :, 1]
    if kind == "EUC_2D":
        return _nint(np.sqrt(dx * dx + dy * dy))
    if kind == "CEIL_2D":
        return np.ceil(np.sqrt(dx * dx + dy * dy))
    if kind == "ATT":
        r = np.sqrt((dx * dx + dy * dy) / 10.0)
        t = _nint(r)
        return np.where(t < r, t + 1, t)
    if kind == "GEO":
        lat = _geo_radians(xy[:, 0])
        lon = _geo_radians(xy[:, 1])
        q1 = np.cos(lon[:, None] - lon[None, :])
        q2 = np.cos(lat[:, None] - lat[None, :])
        q3 = np.cos(lat[:, None] + lat[None, :])
        rrr = 6378.388
        d = np.trunc(rrr * np.arccos(0.5 * ((1.0 + q1) * q2 - (1.0 - q1) * q3)) + 1.0)
        np.fill_diagonal(d, 0.0)
        return d
    raise RankoptInputError(f"EDGE_WEIGHT_TYPE {kind!r} is not supported.")


def _explicit(fmt: str, vals: NDArray[np.float64], n: int) -> NDArray[np.float64]:
    m = np.zeros((n, n))
    if fmt == "FULL_MATRIX":
        return vals[: n * n].reshape(n, n).copy()
    if fmt in ("UPPER_ROW", "LOWER_COL"):
        iu = np.triu_indices(n, 1)
    elif fmt in ("LOWER_ROW", "UPPER_COL"):
        iu = np.tril_indices(n, -1)
    elif fmt in ("UPPER_DIAG_ROW", "LOWER_DIAG_COL"):
        iu = np.triu_indices(n, 0)
    elif fmt in ("LOWER_DIAG_ROW", "UPPER_DIAG_COL"):
        iu = np.tril_indices(n, 0)
    else:
        raise RankoptInputError(f"EDGE_WEIGHT_FORMAT {fmt!r} is not supported.")
    count = len(iu[0])
    if vals.size < count:
        raise RankoptInputError(f"expected {count} weights for {fmt}, found {vals.size}.")
    m[iu] = vals[:count]
    return np.maximum(m, m.T)


def read_tsplib(path: str | os.PathLike[str]) -> tuple[str, NDArray[np.float64]]:
    """Read a symmetric TSPLIB instance; returns ``(name, distance matrix)``.

    Examples
    --------
    >>> import tempfile, os
    >>> f = os.path.join(tempfile.mkdtemp(), "sq.tsp")
    >>> _ = open(f, "w").write("NAME: sq\\nDIMENSION: 3\\nEDGE_WEIGHT_TYPE: EUC_2D\\n"
    ...                        "NODE_COORD_SECTION\\n1 0 0\\n2 3 4\\n3 0 4\\nEOF\\n")
    >>> read_tsplib(f)[1]
    array([[0., 5., 4.],
           [5., 0., 3.],
           [4., 3., 0.]])
    """
    with open_regular(path, what="TSPLIB file", max_bytes=MAX_TEXT_BYTES) as fh:
        text = fh.read().decode("utf-8", errors="replace").splitlines()
    spec: dict[str, str] = {}
    section = None
    data: list[tuple[str, str]] = []
    for line in text:
        s = line.strip()
        if not s or s == "EOF":
            continue
        head = s.split(":", 1)[0].strip().upper() if ":" in s else s.split()[0].upper()
        if head in ("NODE_COORD_SECTION", "EDGE_WEIGHT_SECTION", "DISPLAY_DATA_SECTION"):
            section = head
            continue
        if ":" in s and section is None or (":" in s and not s[0].isdigit() and not s[0] == "-"):
            key, _, val = s.partition(":")
            spec[key.strip().upper()] = val.strip()
            section = None
            continue
        if section in ("NODE_COORD_SECTION", "EDGE_WEIGHT_SECTION"):
            data.append((section, s))
    try:
        n = int(spec["DIMENSION"])
    except (KeyError, ValueError):
        raise RankoptInputError(f"{str(path)!r}: missing or bad DIMENSION.") from None
    check_processes(n, f"TSPLIB file {str(path)!r} (DIMENSION)")  # before the n x n matrix
    kind = spec.get("EDGE_WEIGHT_TYPE", "").upper()
    name = spec.get("NAME", Path(path).stem)
    if kind == "EXPLICIT":
        nums = np.array(
            [float(x) for sec, s in data if sec == "EDGE_WEIGHT_SECTION" for x in s.split()]
        )
        mat = _explicit(spec.get("EDGE_WEIGHT_FORMAT", "").upper(), nums, n)
    else:
        rows = [s.split() for sec, s in data if sec == "NODE_COORD_SECTION"]
        xy = np.array([[float(r[1]), float(r[2])] for r in rows[:n]])
        if xy.shape != (n, 2):
            raise RankoptInputError(f"{str(path)!r}: expected {n} coordinates, found {len(rows)}.")
        mat = _coords_matrix(kind, xy)
    np.fill_diagonal(mat, 0.0)
    return name, mat
