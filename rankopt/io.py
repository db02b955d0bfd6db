"""Reading latency and bandwidth matrices from files.

Formats
-------
``.npy``
    A 2-D numeric array (loaded with ``allow_pickle=False``).
``.csv``
    Comma-separated numbers; an optional header row and/or first column of
    host names. Empty cells are missing measurements (NaN), except on the
    diagonal, which is ignored.
``.json``
    A list of rows, ``{"matrix": rows, "labels": [...], "unit": "ms"}``, or a
    nested mapping ``{src: {dst: value}}`` (as published by cloudping.co).
``.npz``
    A :class:`rankopt.Measurement` written by the probe; its ``latency`` is used.
"""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from rankopt._validation import NanPolicy, RankoptInputError, check_matrix

__all__ = ["load_matrix", "load_matrix_and_labels", "read_matrix", "UNITS"]

#: Multipliers from a unit name to seconds (latency) or bytes/s (bandwidth).
UNITS: dict[str, float] = {
    "s": 1.0,
    "ms": 1e-3,
    "us": 1e-6,
    "ns": 1e-9,
    "B/s": 1.0,
    "kB/s": 1e3,
    "MB/s": 1e6,
    "GB/s": 1e9,
    "Gbit/s": 1e9 / 8,
    "Mbit/s": 1e6 / 8,
}


def read_matrix(
    path: str | os.PathLike[str],
) -> tuple[NDArray[np.float64], list[str] | None, str | None]:
    """Read a matrix file as stored: ``(values, labels or None, unit named in the file or None)``.

    No validation and no unit conversion; see :func:`load_matrix`.
    """
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"matrix file {str(p)!r} does not exist.")
    suffix = p.suffix.lower()
    if suffix == ".npy":
        try:
            arr = np.load(p, allow_pickle=False)
        except ValueError as exc:
            raise RankoptInputError(f"{str(p)!r}: not a plain numeric .npy file ({exc}).") from None
        return np.asarray(arr, dtype=float), None, None
    if suffix == ".npz":
        from rankopt.probe.measurement import load_measurement

        m = load_measurement(p)
        return np.asarray(m.latency, dtype=float), list(m.hosts), "s"
    if suffix == ".csv":
        return _read_csv(p)
    if suffix == ".json":
        return _read_json(p)
    raise RankoptInputError(
        f"matrix file {str(p)!r} has unknown extension {suffix!r}; expected one of "
        "'.npy', '.csv', '.json', '.npz'."
    )


def _to_float(cell: str, where: str) -> float:
    cell = cell.strip()
    if cell == "" or cell.lower() in ("nan", "na", "-"):
        return float("nan")
    try:
        return float(cell)
    except ValueError:
        raise RankoptInputError(f"{where}: {cell!r} is not a number.") from None


def _read_csv(p: Path) -> tuple[NDArray[np.float64], list[str] | None, str | None]:
    with open(p, newline="") as fh:
        rows = [r for r in csv.reader(fh) if any(c.strip() for c in r)]
    if not rows:
        raise RankoptInputError(f"{str(p)!r} is empty.")

    def numeric(cell: str) -> bool:
        try:
            float(cell)
            return True
        except ValueError:
            return cell.strip() == ""

    header = not all(numeric(c) for c in rows[0][1:])
    labels: list[str] | None = None
    if header:
        labels = [c.strip() for c in rows[0][1:]]
        rows = rows[1:]
    row_labels = not all(numeric(r[0]) for r in rows if r)
    if row_labels:
        names = [r[0].strip() for r in rows]
        rows = [r[1:] for r in rows]
        if labels is None:
            labels = names
    widths = {len(r) for r in rows}
    if len(widths) != 1:
        bad = next(i for i, r in enumerate(rows) if len(r) != len(rows[0]))
        raise RankoptInputError(
            f"{str(p)!r}: rows have different lengths; data row {bad} has {len(rows[bad])} "
            f"cells, data row 0 has {len(rows[0])}."
        )
    vals = np.array(
        [
            [
                0.0
                if i == j and c.strip() == ""
                else _to_float(c, f"{str(p)!r} data row {i}, column {j}")
                for j, c in enumerate(r)
            ]
            for i, r in enumerate(rows)
        ],
        dtype=float,
    )
    if labels is not None and len(labels) != vals.shape[0]:
        labels = None
    return vals, labels, None


def _read_json(p: Path) -> tuple[NDArray[np.float64], list[str] | None, str | None]:
    try:
        data: Any = json.loads(p.read_text())
    except json.JSONDecodeError as exc:
        raise RankoptInputError(f"{str(p)!r} is not valid JSON ({exc}).") from None
    unit = None
    labels = None
    if isinstance(data, dict) and "matrix" in data:
        labels = data.get("labels")
        unit = data.get("unit")
        data = data["matrix"]
    if isinstance(data, dict):  # {src: {dst: value}}
        labels = list(data)
        for row in data.values():
            for k in row:
                if k not in labels:
                    labels.append(k)
        idx = {k: i for i, k in enumerate(labels)}
        vals = np.full((len(labels), len(labels)), np.nan)
        for src, row in data.items():
            if not isinstance(row, dict):
                raise RankoptInputError(
                    f"{str(p)!r}: entry {src!r} is not a mapping of destinations."
                )
            for dst, v in row.items():
                vals[idx[src], idx[dst]] = np.nan if v is None else float(v)
        np.fill_diagonal(vals, 0.0)
        return vals, labels, unit
    try:
        vals = np.array([[np.nan if v is None else v for v in row] for row in data], dtype=float)
    except (TypeError, ValueError) as exc:
        raise RankoptInputError(f"{str(p)!r}: expected a list of numeric rows ({exc}).") from None
    return vals, labels, unit


def load_matrix(
    path: str | os.PathLike[str],
    *,
    unit: str | None = None,
    nan: NanPolicy = "raise",
    rtt: bool = False,
    name: str = "latency",
) -> NDArray[np.float64]:
    """Load and validate a latency (or bandwidth) matrix from a file.

    Parameters
    ----------
    path : str or path-like
        ``.npy``, ``.csv``, ``.json`` or a probe measurement ``.npz``.
    unit : str, optional
        Unit of the stored values (``"s"``, ``"ms"``, ``"us"``, ``"ns"``, or a
        bandwidth unit such as ``"Gbit/s"``). Defaults to the unit named in the
        file, else seconds. The result is always in SI units.
    nan : {"raise", "symmetric", "max", "mean"}
        Policy for missing measurements; see :func:`rankopt.check_matrix`.
    rtt : bool
        The values are round-trip times: halve them to get one-way latency.
    name : str
        Argument name used in error messages.

    Returns
    -------
    ndarray of float64, shape (n, n)

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    RankoptInputError
        If the file cannot be parsed or the matrix is invalid.

    Examples
    --------
    >>> import numpy as np, tempfile, os
    >>> d = tempfile.mkdtemp(); f = os.path.join(d, "m.csv")
    >>> _ = open(f, "w").write("host,a,b\\na,0,2\\nb,3,0\\n")
    >>> load_matrix(f, unit="ms")
    array([[0.   , 0.002],
           [0.003, 0.   ]])
    """
    return load_matrix_and_labels(path, unit=unit, nan=nan, rtt=rtt, name=name)[0]


def load_matrix_and_labels(
    path: str | os.PathLike[str],
    *,
    unit: str | None = None,
    nan: NanPolicy = "raise",
    rtt: bool = False,
    name: str = "latency",
) -> tuple[NDArray[np.float64], list[str] | None]:
    """:func:`load_matrix` plus the host names stored in the file (``None`` if it has none),
    from one read of the file."""
    vals, labels, file_unit = read_matrix(path)
    u = unit if unit is not None else (file_unit or "s")
    if u not in UNITS:
        raise RankoptInputError(
            f"`unit` must be one of {', '.join(map(repr, UNITS))}; got {u!r} instead."
        )
    out = check_matrix(vals, name, nan=nan)
    out *= UNITS[u]
    if rtt:
        out *= 0.5
    return out, labels
