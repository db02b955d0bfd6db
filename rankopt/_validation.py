"""Input validation shared by every public entry point.

Checks run once, at the public boundary, in a fixed order
(dtype -> ndim -> square -> n >= 2 -> finite -> non-negative); kernels trust
their inputs. Every message names the argument, the expectation, the value and
where it was found.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "RankoptInputError",
    "check_matrix",
    "check_order",
    "check_positive",
    "check_options",
    "NanPolicy",
]

NanPolicy = Literal["raise", "symmetric", "max", "mean"]
_NAN_POLICIES = ("raise", "symmetric", "max", "mean")


class RankoptInputError(ValueError):
    """Raised when an argument passed to rankopt is invalid."""


def _first_index(mask: NDArray[np.bool_]) -> tuple[int, ...]:
    return tuple(int(i) for i in np.argwhere(mask)[0])


def _fmt_index(name: str, idx: tuple[int, ...]) -> str:
    return f"{name}[{', '.join(str(i) for i in idx)}]"


def check_matrix(
    a: ArrayLike,
    name: str = "latency",
    *,
    nan: NanPolicy = "raise",
    min_n: int = 2,
    allow_zero: bool = True,
) -> NDArray[np.float64]:
    """Validate a square matrix of non-negative finite numbers.

    Parameters
    ----------
    a : array_like, shape (n, n)
        The matrix. The diagonal is ignored (set to 0 in the result).
    name : str
        Name of the argument, used in error messages.
    nan : {"raise", "symmetric", "max", "mean"}
        What a NaN (a missing measurement) means. ``"raise"`` rejects it;
        ``"symmetric"`` fills ``a[i, j]`` from ``a[j, i]`` and raises if both
        are missing; ``"max"`` and ``"mean"`` first fill from the reverse
        direction, then use the largest or the mean measured off-diagonal
        value (a pessimistic or neutral guess).
    min_n : int
        Smallest accepted size.
    allow_zero : bool
        Whether off-diagonal zeros are accepted (``False`` for bandwidths).

    Returns
    -------
    ndarray of float64, shape (n, n)
        A C-contiguous copy with a zero diagonal.

    Raises
    ------
    RankoptInputError
        If the matrix is not numeric, not 2-D, not square, smaller than
        ``min_n``, contains inf (or NaN under ``nan="raise"``) or negative
        entries.

    Examples
    --------
    >>> check_matrix([[0, 1], [2, 0]])
    array([[0., 1.],
           [2., 0.]])
    """
    if nan not in _NAN_POLICIES:
        raise RankoptInputError(
            f"`nan` must be one of {', '.join(map(repr, _NAN_POLICIES))}; got {nan!r}."
        )
    try:
        arr = np.asarray(a)
    except Exception as exc:  # ragged nested lists and similar
        raise RankoptInputError(f"`{name}` must be a numeric array; {exc}") from None
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == np.bool_):
        raise RankoptInputError(f"`{name}` must be a numeric array; got dtype {arr.dtype} instead.")
    if np.issubdtype(arr.dtype, np.complexfloating):
        raise RankoptInputError(f"`{name}` must be real; got dtype {arr.dtype} instead.")
    if arr.ndim != 2:
        raise RankoptInputError(
            f"`{name}` must be a 2-D array; got {arr.ndim}-D with shape {arr.shape} instead."
        )
    if arr.shape[0] != arr.shape[1]:
        raise RankoptInputError(f"`{name}` must be square; got shape {arr.shape} instead.")
    n = arr.shape[0]
    if n < min_n:
        raise RankoptInputError(
            f"`{name}` must describe at least {min_n} processes; got shape {arr.shape} instead."
        )
    out = np.array(arr, dtype=np.float64, order="C", copy=True)
    np.fill_diagonal(out, 0.0)
    if not np.isfinite(out.sum()):
        inf = np.isinf(out)
        if inf.any():
            idx = _first_index(inf)
            raise RankoptInputError(
                f"`{name}` must be finite; {_fmt_index(name, idx)} is {out[idx]}."
            )
        out = _fill_nan(out, name, nan)
    if (out < 0).any():
        idx = _first_index(out < 0)
        raise RankoptInputError(
            f"`{name}` must be non-negative; {_fmt_index(name, idx)} is {float(out[idx])}."
        )
    if not allow_zero:
        off = out == 0
        np.fill_diagonal(off, False)
        if off.any():
            idx = _first_index(off)
            raise RankoptInputError(
                f"`{name}` must be positive off the diagonal; {_fmt_index(name, idx)} is 0."
            )
    return out


def _fill_nan(out: NDArray[np.float64], name: str, nan: str) -> NDArray[np.float64]:
    missing = np.isnan(out)
    if nan == "raise":
        idx = _first_index(missing)
        raise RankoptInputError(
            f"`{name}` must be finite; {_fmt_index(name, idx)} is nan "
            f"({int(missing.sum())} missing entries in all). Pass nan='symmetric' to fill "
            "a missing entry from the reverse direction."
        )
    rev = out.T.copy()
    fill = missing & ~np.isnan(rev)
    out[fill] = rev[fill]
    still = np.isnan(out)
    if still.any():
        if nan == "symmetric":
            idx = _first_index(still)
            raise RankoptInputError(
                f"`{name}` has pairs missing in both directions; {_fmt_index(name, idx)} and "
                f"{_fmt_index(name, idx[::-1])} are nan ({int(still.sum())} entries). Use "
                "nan='max' or nan='mean' to fill them."
            )
        known = out[~still & ~np.eye(out.shape[0], dtype=bool)]
        if known.size == 0:
            raise RankoptInputError(f"`{name}` has no measured off-diagonal entry.")
        out[still] = known.max() if nan == "max" else known.mean()
    return out


def check_order(order: ArrayLike, n: int, name: str = "order") -> NDArray[np.int64]:
    """Validate that ``order`` is a permutation of ``range(n)``.

    Examples
    --------
    >>> check_order([2, 0, 1], 3)
    array([2, 0, 1])
    """
    arr = np.asarray(order)
    if arr.ndim != 1:
        raise RankoptInputError(
            f"`{name}` must be a 1-D array; got {arr.ndim}-D with shape {arr.shape} instead."
        )
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        if not (np.issubdtype(arr.dtype, np.floating) and np.all(arr == np.round(arr))):
            raise RankoptInputError(f"`{name}` must hold integers; got dtype {arr.dtype} instead.")
    if arr.shape[0] != n:
        raise RankoptInputError(
            f"`{name}` must have length {n} (one entry per process); got {arr.shape[0]}."
        )
    out = arr.astype(np.int64)
    bad = (out < 0) | (out >= n)
    if bad.any():
        k = int(np.argmax(bad))
        raise RankoptInputError(
            f"`{name}` must be a permutation of 0..{n - 1}; {name}[{k}] is {out[k]}."
        )
    seen = np.zeros(n, dtype=np.int64)
    np.add.at(seen, out, 1)
    if (seen != 1).any():
        dup = int(np.argmax(seen > 1))
        where = np.flatnonzero(out == dup)
        raise RankoptInputError(
            f"`{name}` must be a permutation of 0..{n - 1}; {dup} appears at positions "
            f"{where.tolist()}."
        )
    return out


def check_positive(value: Any, name: str, *, integer: bool = False, allow_none: bool = False):
    """Validate a positive scalar option (``nbytes``, ``time_limit``, budgets)."""
    if value is None and allow_none:
        return None
    ok_types = (int, np.integer) if integer else (int, float, np.integer, np.floating)
    if isinstance(value, bool) or not isinstance(value, ok_types):
        kind = "an integer" if integer else "a number"
        raise RankoptInputError(f"`{name}` must be {kind}; got {value!r} instead.")
    if not np.isfinite(value) or value <= 0:
        raise RankoptInputError(f"`{name}` must be positive and finite; got {value!r} instead.")
    return int(value) if integer else float(value)


def check_options(name: str, value: str, valid: tuple[str, ...] | list[str]) -> str:
    """Validate a string option against the valid choices, listing them on failure."""
    if value not in valid:
        raise RankoptInputError(
            f"`{name}` must be one of {', '.join(map(repr, valid))}; got {value!r} instead."
        )
    return value
