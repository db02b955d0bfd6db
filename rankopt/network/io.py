"""Reading latency and bandwidth matrices from files.

Formats
-------
``.npy``
    A 2-D numeric array (loaded with ``allow_pickle=False``).
``.csv``
    Numbers separated by commas, semicolons, tabs or white space (the
    separator is the one found on every line); an optional header row and/or
    first column of host names. Empty cells are missing measurements (NaN),
    except on the diagonal, which is ignored. A UTF-8 byte-order mark and
    ``#`` comment lines are skipped. The **long format** -- one
    ``src,dst,value`` row per measured pair, ``src``/``dst`` either rank
    indices from 0 or host names, optionally under a header such as
    ``src,dst,latency`` -- is read too; pairs it lacks are missing (NaN).
    Three rows of three numbers without such a header are a 3 x 3 matrix.
``.json``
    A list of rows, ``{"matrix": rows, "labels": [...], "unit": "ms"}``, or a
    nested mapping ``{src: {dst: value}}`` (as published by cloudping.co).
``.npz``
    A :class:`rankopt.Measurement` written by the probe; its ``latency`` is used.

Limits
------
Only regular files are read (a FIFO or a device is refused before it is
opened for reading, so nothing blocks). Text files may hold at most
:data:`rankopt._files.MAX_TEXT_BYTES` (256 MiB), arrays at most
:data:`rankopt._files.MAX_ARRAY_BYTES` (2 GiB, checked from the ``.npy``
header before anything is decompressed or allocated), and a matrix at most
:data:`rankopt._files.MAX_N` (16,384) processes. Every error is one line that
names the file.
"""

from __future__ import annotations

import csv
import json
import os
import re
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from rankopt._files import MAX_TEXT_BYTES, check_processes, load_npy, open_regular
from rankopt._limits import check_nesting
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

    No validation and no unit conversion; see :func:`load_matrix`. The file must
    be a regular file within the size limits of :mod:`rankopt._files`, checked
    before it is read.
    """
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix == ".npy":
        arr = load_npy(p, what="matrix file")
        if arr.dtype.kind not in "iuf":
            raise RankoptInputError(
                f"matrix file {str(p)!r}: not a plain numeric .npy file (dtype {arr.dtype})."
            )
        return np.asarray(arr, dtype=float), None, None
    if suffix == ".npz":
        from rankopt.probe.measurement import load_measurement

        m = load_measurement(p)
        return np.asarray(m.latency, dtype=float), list(m.hosts), "s"
    if suffix not in (".csv", ".json"):
        if not p.exists():
            raise FileNotFoundError(f"matrix file {str(p)!r} does not exist.")
        if not p.is_file():  # a folder (most often with no extension): said so, it raises
            with open_regular(p, what="matrix file", max_bytes=MAX_TEXT_BYTES):
                pass
        raise RankoptInputError(
            f"matrix file {str(p)!r} has unknown extension {suffix!r}; expected one of "
            "'.npy', '.csv', '.json', '.npz'."
        )
    with open_regular(p, what="matrix file", max_bytes=MAX_TEXT_BYTES) as fh:
        raw = fh.read()
    try:
        text = raw.decode("utf-8-sig")  # a byte-order mark is dropped
    except UnicodeDecodeError as exc:
        raise RankoptInputError(
            f"matrix file {str(p)!r} is not UTF-8 text (byte {exc.start})."
        ) from None
    if suffix == ".csv":
        return _read_csv(p, text)
    return _read_json(p, text)


#: A number as a CSV cell may write it: ASCII digits, an optional sign, point and
#: exponent, or inf. Not Python's extras (``1_000``, non-ASCII digits), which
#: ``float()`` would read silently.
_NUMBER = re.compile(
    r"[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|inf(?:inity)?|nan)\Z",
    re.IGNORECASE,
)
#: Cells that mean a missing measurement.
_MISSING = ("", "nan", "na", "-")


def _to_float(cell: str, where: str) -> float:
    cell = cell.strip()
    if cell.lower() in _MISSING:
        return float("nan")
    if not _NUMBER.match(cell):
        raise RankoptInputError(f"{where}: {cell!r} is not a number.")
    return float(cell)


def _numeric(cell: str) -> bool:
    """Whether ``cell`` may be a data cell: a number or a missing-measurement marker."""
    cell = cell.strip()
    return cell.lower() in _MISSING or _NUMBER.match(cell) is not None


def _number(cell: str) -> bool:
    """Whether ``cell`` writes a number (not empty, not a missing-measurement marker)."""
    cell = cell.strip()
    return cell.lower() not in _MISSING and _NUMBER.match(cell) is not None


def _names(cells: list[str]) -> bool:
    """Whether ``cells`` are names (a header row, a first column): some text, no number.

    A row or column that mixes numbers and other text is data with a bad cell
    (``1,5`` in a file with decimal commas, a typo), reported at that cell
    rather than dropped as if it were names.
    """
    return any(not _numeric(c) for c in cells) and not any(_number(c) for c in cells)


#: Column names that mark a CSV in the long format (``src,dst,value`` rows).
_LONG_HEADERS = {
    ("src", "dst"),
    ("source", "destination"),
    ("source", "target"),
    ("from", "to"),
    ("i", "j"),
    ("sender", "receiver"),
}


def _sniff_delimiter(lines: list[str]) -> str | None:
    """The separator of a CSV: tab, ``;`` or ``,`` if on every line, else white space (None)."""
    sample = lines[:50]
    for delim in ("\t", ";", ","):
        if all(delim in line for line in sample):
            return delim
    return None


def _split(text: str) -> list[list[str]]:
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    delim = _sniff_delimiter(lines)
    if delim is None:
        return [ln.split() for ln in lines]
    return list(csv.reader(lines, delimiter=delim))


def _is_long(rows: list[list[str]]) -> bool:
    """Rows ``src, dst, value`` (optionally under a header), as other tools write."""
    header = not _numeric(rows[0][-1]) if rows[0] else False
    body = rows[1:] if header else rows
    if not body or any(len(r) != 3 for r in rows):
        return False
    if header and tuple(c.strip().lower() for c in rows[0][:2]) in _LONG_HEADERS:
        return True
    if len(body) == 3:  # three rows of three: a 3 x 3 matrix
        return False
    ints = all(_is_index(r[0]) and _is_index(r[1]) for r in body)
    names = all(not _numeric(r[0]) and not _numeric(r[1]) for r in body)
    return (ints or names) and all(_numeric(r[2]) for r in body)


def _is_index(cell: str) -> bool:
    cell = cell.strip()
    return cell.isascii() and cell.isdigit()


def _read_long(
    p: Path, rows: list[list[str]]
) -> tuple[NDArray[np.float64], list[str] | None, str | None]:
    if not _numeric(rows[0][-1]):
        rows = rows[1:]
    labels: list[str] | None
    if all(_is_index(r[0]) and _is_index(r[1]) for r in rows):
        src = [int(r[0]) for r in rows]
        dst = [int(r[1]) for r in rows]
        n = max(max(src), max(dst)) + 1
        labels = None
    else:
        idx: dict[str, int] = {}
        for r in rows:
            for c in r[:2]:
                idx.setdefault(c.strip(), len(idx))
        src = [idx[r[0].strip()] for r in rows]
        dst = [idx[r[1].strip()] for r in rows]
        n = len(idx)
        labels = list(idx)
    check_processes(n, f"matrix file {str(p)!r} (long format)")
    vals = np.full((n, n), np.nan)
    seen: dict[tuple[int, int], int] = {}
    for k, (i, j, r) in enumerate(zip(src, dst, rows, strict=True)):
        if (i, j) in seen:
            raise RankoptInputError(
                f"matrix file {str(p)!r}: pair ({r[0].strip()}, {r[1].strip()}) appears twice "
                f"(data rows {seen[i, j]} and {k})."
            )
        seen[i, j] = k
        vals[i, j] = _to_float(r[2], f"matrix file {str(p)!r} data row {k}, column 2")
    np.fill_diagonal(vals, 0.0)
    return vals, labels, None


_LONG_HINT = (
    "expected an n x n matrix (optionally with a header row and a first column of host names) "
    "or the long format, one 'src,dst,value' row per measured pair"
)


def _read_csv(p: Path, text: str) -> tuple[NDArray[np.float64], list[str] | None, str | None]:
    rows = _split(text)
    where = f"matrix file {str(p)!r}"
    if not rows:
        raise RankoptInputError(f"{where} is empty.")
    if _is_long(rows):
        return _read_long(p, rows)
    header = _names(rows[0][1:])
    labels: list[str] | None = None
    names_row: list[str] = []
    if header:
        names_row = [c.strip() for c in rows[0]]
        labels = names_row[1:]
        rows = rows[1:]
    if not rows:
        raise RankoptInputError(f"{where} has a header row but no data rows.")
    check_processes(len(rows), f"{where} ({len(rows)} data rows)")
    row_labels = _names([r[0] for r in rows if r])
    if row_labels:
        names = [r[0].strip() for r in rows]
        rows = [r[1:] for r in rows]
        if labels is None:
            labels = names
    if any(len(r) != len(rows[0]) for r in rows):
        bad = next(i for i, r in enumerate(rows) if len(r) != len(rows[0]))
        raise RankoptInputError(
            f"{where}: rows have different lengths; data row {bad} has {len(rows[bad])} "
            f"cells, data row 0 has {len(rows[0])}."
        )
    if len(rows[0]) != len(rows):
        raise RankoptInputError(
            f"{where} holds {len(rows)} rows of {len(rows[0])} values, not a square matrix; "
            f"{_LONG_HINT}."
        )
    vals = np.array(
        [
            [
                0.0
                if i == j and c.strip() == ""
                else _to_float(c, f"{where} data row {i}, column {j}")
                for j, c in enumerate(r)
            ]
            for i, r in enumerate(rows)
        ],
        dtype=float,
    )
    if not row_labels and len(names_row) == vals.shape[0]:
        labels = names_row  # a header of names only, without a corner cell
    if labels is not None and len(labels) != vals.shape[0]:
        labels = None
    return vals, labels, None


def _unique_keys(where: str, pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object as a dict; a key given twice (two values for one pair) is refused.

    Examples
    --------
    >>> _unique_keys("f", [("a", 1), ("b", 2)])
    {'a': 1, 'b': 2}
    >>> _unique_keys("f", [("a", 1), ("a", 2)])
    Traceback (most recent call last):
    ...
    rankopt.errors.RankoptInputError: f: key 'a' appears twice in one object (values 1 and 2).
    """
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise RankoptInputError(
                f"{where}: key {key!r} appears twice in one object "
                f"(values {out[key]!r:.40} and {value!r:.40})."
            )
        out[key] = value
    return out


def _json_value(v: Any, where: Callable[[], str]) -> float:
    """One matrix entry of a JSON file: a number, or null (missing); nothing else.

    ``where`` makes the entry's name, only for an error.
    """
    kind = type(v)
    if kind is float:
        return v
    if kind is int:
        try:
            return float(v)
        except OverflowError:  # an integer with hundreds of digits
            return float("inf") if v > 0 else float("-inf")
    if v is None:
        return float("nan")
    what = "a boolean" if isinstance(v, bool) else f"a {type(v).__name__}"
    raise RankoptInputError(f"{where()} is {v!r:.60}, {what}, not a number.")


def _json_row(values: list[Any], where: Callable[[int], str]) -> NDArray[np.float64]:
    """One row of a JSON matrix as floats; each entry a number or null (see :func:`_json_value`).

    Rows of plain numbers take one NumPy conversion; others are read entry by
    entry, and ``where(k)`` names the entry of an error.
    """
    if all(type(v) is float or type(v) is int for v in values):
        try:
            return np.array(values, dtype=np.float64)
        except OverflowError:  # an integer with hundreds of digits: entry by entry
            pass
    return np.array(
        [_json_value(v, partial(where, k)) for k, v in enumerate(values)], dtype=np.float64
    )


def _read_json(p: Path, text: str) -> tuple[NDArray[np.float64], list[str] | None, str | None]:
    where = f"matrix file {str(p)!r}"
    check_nesting(text, where)
    try:
        data: Any = json.loads(text, object_pairs_hook=partial(_unique_keys, where))
    except RankoptInputError:
        raise
    except json.JSONDecodeError as exc:
        raise RankoptInputError(f"{where} is not valid JSON ({exc}).") from None
    except (RecursionError, ValueError) as exc:  # nesting, or an integer too long to read
        raise RankoptInputError(f"{where} cannot be read as JSON ({exc}).") from None
    unit = None
    labels: list[str] | None = None
    if isinstance(data, dict) and "matrix" in data:
        labels = data.get("labels")
        unit = data.get("unit")
        if unit is not None and not isinstance(unit, str):
            raise RankoptInputError(
                f"{where}: 'unit' must be a string such as \"ms\"; got {unit!r}."
            )
        if labels is not None and (
            not isinstance(labels, list) or not all(isinstance(x, str) for x in labels)
        ):
            raise RankoptInputError(
                f"{where}: 'labels' must be a list of names (strings); got {labels!r:.80}."
            )
        data = data["matrix"]
    if isinstance(data, dict):  # {src: {dst: value}}
        index: dict[str, int] = {}
        for src, row in data.items():
            if not isinstance(row, dict):
                raise RankoptInputError(
                    f"{where}: entry {src!r} must be a mapping of destinations to values; "
                    f"got {type(row).__name__}."
                )
            index.setdefault(src, len(index))
            for dst in row:
                index.setdefault(dst, len(index))
        check_processes(len(index), f"{where} ({len(index)} hosts)")
        vals = np.full((len(index), len(index)), np.nan)
        for src, row in data.items():
            i = index[src]
            cols = [index[dst] for dst in row]
            vals[i, cols] = _json_row(
                list(row.values()),
                partial(_entry_of_key, where, src, list(row)),
            )
        np.fill_diagonal(vals, 0.0)
        return vals, list(index), unit
    if not isinstance(data, list) or not all(isinstance(row, list) for row in data):
        raise RankoptInputError(
            f'{where}: expected a list of rows of numbers, {{"matrix": rows}} or '
            f"{{src: {{dst: value}}}}; got {type(data).__name__}"
            + ("" if not isinstance(data, list) else " with a row that is not a list")
            + "."
        )
    check_processes(len(data), f"{where} ({len(data)} rows)")
    width = {len(row) for row in data}
    if len(width) > 1:
        bad = next(i for i, row in enumerate(data) if len(row) != len(data[0]))
        raise RankoptInputError(
            f"{where}: rows have different lengths; row {bad} has {len(data[bad])} values, "
            f"row 0 has {len(data[0])}."
        )
    vals = np.empty((len(data), len(data[0]) if data else 0))
    for i, row in enumerate(data):
        vals[i] = _json_row(row, partial(_entry_of_index, where, i))
    if labels is not None and len(labels) != vals.shape[0]:
        raise RankoptInputError(
            f"{where}: 'labels' names {len(labels)} hosts, the matrix has {vals.shape[0]} rows."
        )
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
        If the file is not a regular file (a FIFO, a directory), exceeds the
        size limits (see *Limits* in :mod:`rankopt.network.io`), cannot be parsed, or
        the matrix is invalid. The message is one line and names the file.

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
    if unit is None and file_unit is not None and file_unit not in UNITS:
        raise RankoptInputError(
            f"matrix file {os.fspath(path)!r}: 'unit' must be one of "
            f"{', '.join(map(repr, UNITS))}; got {file_unit!r}."
        )
    u = unit if unit is not None else (file_unit or "s")
    if u not in UNITS:
        raise RankoptInputError(
            f"`unit` must be one of {', '.join(map(repr, UNITS))}; got {u!r} instead."
        )
    scale = UNITS[u] * (0.5 if rtt else 1.0)
    if vals.dtype.kind in "iuf" and scale != 1.0:
        vals = vals * scale  # the valid range is in seconds: convert first (NaN stays NaN)
    try:
        out = check_matrix(vals, name, nan=nan, copy=False)
    except RankoptInputError as exc:
        msg = str(exc)
        if "must be square" in msg:
            msg += f" {_LONG_HINT[0].upper()}{_LONG_HINT[1:]}."
        raise RankoptInputError(f"matrix file {os.fspath(path)!r}: {msg}") from None
    if np.shares_memory(out, vals) and vals.flags.writeable:
        out = vals  # already valid, and ours alone: no second copy of the file's matrix
    return out, labels


def _entry_of_key(where: str, src: Any, keys: list[Any], k: int) -> str:
    """Where entry ``k`` of the row of ``src`` is, in a ``{src: {dst: value}}`` matrix."""
    return f"{where}: entry [{src!r}][{keys[k]!r}]"


def _entry_of_index(where: str, i: int, k: int) -> str:
    """Where entry ``[i][k]`` of a list-of-rows matrix is."""
    return f"{where}: entry [{i}][{k}]"
