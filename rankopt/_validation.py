"""Input validation shared by every public entry point.

Checks run once, at the public boundary, in a fixed order
(dtype -> ndim -> square -> n >= 2 -> finite -> range); kernels trust
their inputs. Every message names the argument, the expectation, the value and
where it was found.

Valid range
-----------
Every matrix entry and size that passes lies in the range of its quantity
(:data:`RANGES`), so that no sum, product or quotient a model or a kernel
forms can overflow or lose every digit:

* latency: finite, ``0 <= x <= 1e6`` s (11.6 days; real one-way latencies
  are below 1 s, so a larger value is a unit mistake);
* bandwidth: finite, ``1e-3 <= x <= 1e15`` B/s (1 PB/s, a thousand times
  the fastest link today), off the diagonal;
* message size ``nbytes``: ``0 < x <= 1e18`` bytes (1 EB);
* uplink sharing exponent ``straggle``: ``1 <= x <= 2`` (:data:`STRAGGLE_RANGE`),
  so ``K**straggle <= n**2``.
* how other tenants' load answers more flows, ``elastic``: ``-1 <= x <= 1``.

One transfer then takes at most ``1e6 + 1e18 / 1e-3 = 1e21`` s, and a sum
over the ``n^2 = 1e10`` pairs of ``n = 1e5`` processes stays below ``1e31``
(and its square below ``1e62``), far from the float64 limit ``1.8e308``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from rankopt.errors import RankoptInputError

__all__ = [
    "RankoptInputError",
    "check_matrix",
    "check_order",
    "check_groups",
    "check_positive",
    "check_options",
    "check_quantity",
    "check_host_name",
    "check_host_names",
    "NanPolicy",
    "Quantity",
    "ValueRange",
    "RANGES",
    "STRAGGLE_RANGE",
    "check_straggle",
    "check_elastic",
]

NanPolicy = Literal["raise", "symmetric", "max", "mean"]
_NAN_POLICIES = ("raise", "symmetric", "max", "mean")

Quantity = Literal["latency", "bandwidth", "nbytes"]


@dataclass(frozen=True)
class ValueRange:
    """The values a quantity may take (off the diagonal, for matrices).

    Attributes
    ----------
    unit : str
        SI unit, named in error messages.
    low, high : float
        Smallest and largest accepted value; ``low`` does not apply to 0
        when ``zero`` is true.
    zero : bool
        Whether 0 is accepted.
    """

    unit: str
    low: float
    high: float
    zero: bool


#: Accepted range of each quantity (see the module docstring for why).
RANGES: dict[str, ValueRange] = {
    "latency": ValueRange("s", 0.0, 1e6, True),
    "bandwidth": ValueRange("B/s", 1e-3, 1e15, False),
    "nbytes": ValueRange("bytes", 0.0, 1e18, False),
}


#: Largest positive integer option (a budget such as ``max_iter``): 2**53, the
#: largest integer a float64 holds exactly (:data:`rankopt._limits.MAX_ITERATIONS`).
MAX_INTEGER = 2**53


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
    quantity: Literal["latency", "bandwidth"] | None = None,
    copy: bool = True,
    dtypes: tuple[Any, ...] = (np.float64,),
) -> NDArray[Any]:
    """Validate a square matrix of latencies (or bandwidths) in their valid range.

    Parameters
    ----------
    a : array_like, shape (n, n)
        The matrix: real numbers (not bool), ``timedelta64`` durations for a
        latency (converted to seconds; ``NaT`` is a missing entry), or a
        masked array whose masked entries are missing. The diagonal is
        ignored (set to 0 in the result).
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
        Whether off-diagonal zeros are accepted; ``False`` (and no
        ``quantity``) means a bandwidth.
    quantity : {"latency", "bandwidth"}, optional
        Which range of :data:`RANGES` the off-diagonal entries must lie in;
        by default ``"bandwidth"`` when ``allow_zero`` is false, else
        ``"latency"``.
    copy : bool, default True
        ``False``: when ``a`` already is a C-contiguous array of one of
        ``dtypes`` with a zero diagonal and no missing entry, return a
        read-only view of it instead of a copy (scikit-learn's
        ``check_array(copy=False)``); otherwise one copy is made, as with
        ``True``.
    dtypes : tuple of numpy dtypes, default ``(numpy.float64,)``
        The dtypes the result may have; the first is the one a copy gets. A
        float32 input stays float32 (a view, or a float32 copy) when
        ``numpy.float32`` is listed.

    Returns
    -------
    ndarray, shape (n, n)
        A C-contiguous array of one of ``dtypes`` with a zero diagonal, in SI
        units: a copy, or with ``copy=False`` possibly a read-only view of
        ``a``.

    Raises
    ------
    RankoptInputError
        If the matrix is not real numbers (complex, bool, strings, objects,
        dates), not 2-D, not square, smaller than ``min_n``, contains inf (or
        a missing entry under ``nan="raise"``), or an off-diagonal entry
        outside the range of its quantity (latency: 0 to 1e6 s; bandwidth:
        1e-3 to 1e15 B/s).

    Notes
    -----
    Checks run in the order dtype -> ndim -> square -> n >= min_n -> finite
    -> range, and the range is checked on the measured entries before
    missing ones are filled (every fill then lies in range too). The finite
    check sums the matrix first and locates a bad entry only when the sum is
    not finite; a sum that overflows on finite entries is left to the range
    check, which names the first entry out of range.

    Examples
    --------
    >>> check_matrix([[0, 1], [2, 0]])
    array([[0., 1.],
           [2., 0.]])
    >>> check_matrix(np.array([[0, 2], [3, 0]], dtype="timedelta64[ms]"))
    array([[0.   , 0.002],
           [0.003, 0.   ]])
    """
    if not isinstance(nan, str) or nan not in _NAN_POLICIES:
        raise RankoptInputError(
            f"`nan` must be one of {', '.join(map(repr, _NAN_POLICIES))}; got {nan!r}."
        )
    if quantity is None:
        quantity = "latency" if allow_zero else "bandwidth"
    check_options("quantity", quantity, ("latency", "bandwidth"))
    rng = RANGES[quantity]
    if hasattr(a, "toarray") and hasattr(a, "nnz"):  # scipy.sparse
        raise RankoptInputError(
            f"`{name}` must be a dense array; got a sparse {type(a).__name__} instead "
            "(call .toarray() first)."
        )
    mask = None
    try:
        if np.ma.isMaskedArray(a):
            mask = np.ma.getmaskarray(a)
            arr = np.asarray(np.ma.getdata(a))
        else:
            arr = np.asarray(a)
    except Exception as exc:  # ragged nested lists and similar
        raise RankoptInputError(f"`{name}` must be a numeric array; {exc}") from None
    arr = _as_real(arr, name, quantity)
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
    kept = _kept_dtype(arr, dtypes)
    masked = mask is not None and bool(mask.any())
    if not copy and not masked and _no_copy_needed(arr, kept):
        with np.errstate(over="ignore", invalid="ignore"):
            total = arr.sum(dtype=np.float64)
        if np.isfinite(total):
            _check_range(arr, name, rng)
            view = arr.view()
            view.setflags(write=False)
            return view
    out = np.array(arr, dtype=kept, order="C", copy=True)
    if masked:
        out[mask] = np.nan
    np.fill_diagonal(out, 0.0)
    with np.errstate(over="ignore", invalid="ignore"):
        total = out.sum(dtype=np.float64)
    has_nan = False
    if not np.isfinite(total):
        inf = np.isinf(out)
        if inf.any():
            idx = _first_index(inf)
            raise RankoptInputError(
                f"`{name}` must be finite; {_fmt_index(name, idx)} is {out[idx]}."
            )
        has_nan = bool(np.isnan(total))
    _check_range(out, name, rng)
    if has_nan:
        out = _fill_nan(out, name, nan, mask if mask is not None and mask.any() else None)
    return out


def _kept_dtype(arr: np.ndarray, dtypes: tuple[Any, ...]) -> Any:
    """The dtype of the validated matrix: ``arr``'s when listed, else the first of ``dtypes``."""
    for dt in dtypes:
        if arr.dtype == np.dtype(dt):
            return np.dtype(dt)
    return np.dtype(dtypes[0])


def _no_copy_needed(arr: np.ndarray, dtype: Any) -> bool:
    """Whether ``arr`` can be used as is: the kept dtype, C order and a zero diagonal."""
    if arr.dtype != dtype or not arr.flags.c_contiguous:
        return False
    diag = np.diagonal(arr)
    return bool(np.all(diag == 0))


def _as_real(arr: np.ndarray, name: str, quantity: str) -> np.ndarray:
    """``arr`` as real numbers (timedelta64 latencies in seconds), or a clear error."""
    kind = arr.dtype.kind
    if kind == "m":
        if quantity != "latency":
            raise RankoptInputError(
                f"`{name}` must be a rate in B/s; got durations (dtype {arr.dtype}) instead."
            )
        with np.errstate(invalid="ignore"):
            return arr / np.timedelta64(1, "s")  # NaT -> nan: a missing entry
    if kind in "iuf":
        return arr
    if kind == "c":
        raise RankoptInputError(
            f"`{name}` must be real; got dtype {arr.dtype} instead (the imaginary part would be "
            "lost: pass the real part or the magnitude explicitly)."
        )
    hint = {
        "b": "booleans are not measurements; pass the values as numbers",
        "O": "convert it with numpy.asarray(x, dtype=float); None is then nan, a missing entry",
        "U": "parse the strings first; rankopt.load_matrix reads CSV and JSON files",
        "S": "parse the strings first; rankopt.load_matrix reads CSV and JSON files",
        "M": "these are dates, not durations; subtract a start time to get timedelta64",
    }.get(kind, "pass real numbers")
    raise RankoptInputError(
        f"`{name}` must be a numeric array; got dtype {arr.dtype} instead ({hint})."
    )


def _check_range(out: NDArray[np.float64], name: str, rng: ValueRange) -> None:
    """Raise on the first off-diagonal entry outside ``rng`` (NaN entries are skipped)."""
    flat = out.ravel()
    if flat.size == 0:
        return
    lo = float(np.fmin.reduce(flat))
    hi = float(np.fmax.reduce(flat))
    if lo < 0:
        idx = _first_index(out < 0)
        raise RankoptInputError(
            f"`{name}` must be non-negative; {_fmt_index(name, idx)} is {float(out[idx])}."
        )
    if hi > rng.high:
        idx = _first_index(out > rng.high)
        raise RankoptInputError(
            f"`{name}` must be at most {rng.high:g} {rng.unit}; {_fmt_index(name, idx)} is "
            f"{float(out[idx]):g} ({_UNIT_HINT[rng.unit]})."
        )
    if rng.zero and rng.low <= 0:
        return
    off = ~np.eye(out.shape[0], dtype=bool)
    if not rng.zero:
        zero = off & (out == 0)
        if zero.any():
            idx = _first_index(zero)
            raise RankoptInputError(
                f"`{name}` must be positive off the diagonal; {_fmt_index(name, idx)} is 0."
            )
    small = off & (out < rng.low)
    if small.any():
        idx = _first_index(small)
        raise RankoptInputError(
            f"`{name}` must be at least {rng.low:g} {rng.unit} off the diagonal; "
            f"{_fmt_index(name, idx)} is {float(out[idx]):g} ({_UNIT_HINT[rng.unit]})."
        )


_UNIT_HINT = {
    "s": "values are seconds: convert other units first",
    "B/s": "values are bytes/second: convert other units first",
    "bytes": "sizes are bytes",
}


def _fill_nan(
    out: NDArray[np.float64], name: str, nan: str, mask: NDArray[np.bool_] | None = None
) -> NDArray[np.float64]:
    """Fill the missing (NaN; masked in the input) entries under the ``nan`` policy."""
    missing = np.isnan(out)
    if nan == "raise":
        idx = _first_index(missing)
        what = "masked" if mask is not None and mask[idx] else "nan"
        raise RankoptInputError(
            f"`{name}` must be finite; {_fmt_index(name, idx)} is {what} "
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
                f"{_fmt_index(name, idx[::-1])} are {'missing' if mask is not None else 'nan'} "
                f"({int(still.sum())} entries). Use "
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
        big = ~(np.abs(arr) < 2**62)  # inf, or beyond int64: not cast into a wrong number
        if big.any():
            k = int(np.argmax(big))
            raise RankoptInputError(
                f"`{name}` must be a permutation of 0..{n - 1}; {name}[{k}] is {float(arr[k])!r}."
            )
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


def check_groups(groups: Any, n: int) -> list[NDArray[np.int64]]:
    """Validate one label array or a list of them (finest first) -> list of int arrays.

    Levels must be nested: processes that share a group at one level share a
    group at every coarser level.
    """
    arr = groups
    if isinstance(groups, np.ndarray) and groups.ndim == 1:
        arr = [groups]
    elif isinstance(groups, np.ndarray) and groups.ndim == 2:
        arr = list(groups)
    elif isinstance(groups, Sequence) and groups and np.ndim(groups[0]) == 0:
        arr = [groups]
    if not isinstance(arr, (list, tuple)) or not arr:
        raise RankoptInputError(
            "`groups` must be one label array of length n or a list of them (finest first); "
            f"got {type(groups).__name__} instead."
        )
    out = []
    for k, g in enumerate(arr):
        lab = np.asarray(g)
        if lab.shape != (n,):
            raise RankoptInputError(
                f"`groups` level {k} must have shape ({n},) (one label per process); "
                f"got shape {lab.shape}."
            )
        if lab.size and not np.issubdtype(lab.dtype, np.integer):
            raise RankoptInputError(
                f"`groups` level {k} must hold integers; got dtype {lab.dtype}."
            )
        out.append(np.unique(lab, return_inverse=True)[1].reshape(-1).astype(np.int64))
    for k in range(len(out) - 1):
        fine, coarse = out[k], out[k + 1]
        parent = np.full(int(fine.max()) + 1 if n else 0, -1, dtype=np.int64)
        parent[fine] = coarse
        split = parent[fine] != coarse  # a group of level k in two groups of level k + 1
        if split.any():
            i = int(np.argmax(split))
            j = int(np.flatnonzero((fine == fine[i]) & (coarse != coarse[i]))[0])
            raise RankoptInputError(
                f"`groups` levels must be nested (finest first): processes {min(i, j)} and "
                f"{max(i, j)} share "
                f"a group at level {k} but not at level {k + 1}."
            )
    return out


def check_positive(value: Any, name: str, *, integer: bool = False, allow_none: bool = False):
    """Validate a positive scalar option (``nbytes``, ``time_limit``, budgets)."""
    if value is None and allow_none:
        return None
    ok_types = (int, np.integer) if integer else (int, float, np.integer, np.floating)
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, ok_types):
        kind = "an integer" if integer else "a number"
        raise RankoptInputError(f"`{name}` must be {kind}; got {value!r} instead.")
    if integer:
        if int(value) <= 0:
            raise RankoptInputError(f"`{name}` must be positive and finite; got {value!r} instead.")
        if int(value) > MAX_INTEGER:
            raise RankoptInputError(
                f"`{name}` must be at most 2**53 ({MAX_INTEGER:.4g}); got {value!r} instead."
            )
        return int(value)
    if not math.isfinite(value) or value <= 0:  # math: a Python int of any size is fine
        raise RankoptInputError(f"`{name}` must be positive and finite; got {value!r} instead.")
    return float(value)


def check_quantity(value: Any, name: str, quantity: Quantity) -> float:
    """Validate a positive scalar of ``quantity`` (a bandwidth, ``nbytes``) against :data:`RANGES`.

    Examples
    --------
    >>> check_quantity(1e9, "bandwidth", "bandwidth")
    1000000000.0
    """
    v = check_positive(value, name)
    rng = RANGES[quantity]
    if v > rng.high:
        raise RankoptInputError(
            f"`{name}` must be at most {rng.high:g} {rng.unit}; got {v:g} ({_UNIT_HINT[rng.unit]})."
        )
    if v < rng.low:
        raise RankoptInputError(
            f"`{name}` must be at least {rng.low:g} {rng.unit}; got {v:g} ({_UNIT_HINT[rng.unit]})."
        )
    return v


def check_options(name: str, value: str, valid: tuple[str, ...] | list[str]) -> str:
    """Validate a string option against the valid choices, listing them on failure."""
    if not isinstance(value, str) or value not in valid:
        raise RankoptInputError(
            f"`{name}` must be one of {', '.join(map(repr, valid))}; got {value!r} instead."
        )
    return value


# ----------------------------------------------------------------- host names
#: One label of a host name: 1-63 ASCII letters, digits, '-' and '_', neither
#: first nor last a '-'. ``\Z`` (not ``$``) so a trailing newline fails.
_LABEL = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?\Z")
#: An IPv6 zone (``fe80::1%eth0``): an interface name or number.
_ZONE = re.compile(r"[A-Za-z0-9_.-]{1,15}\Z")

#: What :func:`check_host_name` accepts, as its errors say it.
_HOST_RULE = (
    "an RFC 1123 host name (dot-separated labels of 1-63 letters, digits, '-' and '_', not "
    "starting or ending with '-') or an IP address"
)


def _host_name_problem(name: str) -> str | None:
    """Why ``name`` is not an accepted host name, or ``None`` when it is."""
    import ipaddress

    if not name:
        return "it is empty"
    if not name.isascii() or not name.isprintable():
        bad = next(c for c in name if not (c.isascii() and c.isprintable()))
        return f"it holds {bad!r} (white space, a control or a non-ASCII character)"
    addr, pct, zone = name.partition("%")
    if ":" in addr:
        try:
            ipaddress.IPv6Address(addr)
        except ValueError:
            return "':' appears only in an IPv6 address, and this is none"
        if pct and not _ZONE.match(zone):
            return f"the IPv6 zone {zone!r} is not an interface name"
        return None
    if pct:
        return "'%' appears only before the zone of an IPv6 address"
    body = name[:-1] if name.endswith(".") else name
    labels = body.split(".")
    if all(part.isdigit() for part in labels) and len(labels) > 1:
        try:
            ipaddress.IPv4Address(body)
        except ValueError:
            return "all-numeric labels make an IPv4 address, and this is none"
        return None
    if len(body) > 253:
        return f"it is {len(body)} characters long (253 at most)"
    for part in labels:
        if not _LABEL.match(part):
            if not part:
                return "it has an empty label (two dots, or a leading dot)"
            if len(part) > 63:
                return f"the label {part[:12]!r}... is {len(part)} characters long (63 at most)"
            odd = next((c for c in part if not (c.isalnum() or c in "-_")), None)
            if odd is not None:
                return f"it holds {odd!r}"
            return f"the label {part!r} starts or ends with '-'"
    return None


#: Characters of a refused host name an error shows: every name up to the 253 (and a
#: bit) a host name may have; a whole line of another file is cut.
_NAME_SHOWN = 300


def check_host_name(name: Any, what: str = "host name", *, where: str = "") -> str:
    """Return ``name`` if it is a host name rankopt accepts; raise otherwise.

    One rule for every name that enters rankopt (a probe's hosts, a
    matrix file's, an order file's, a topology's, ``MASTER_ADDR``): what
    ``hostname``, ``hostname -f``, DNS, Slurm, Kubernetes and cloud
    metadata report, and nothing that could break a line of a rankfile, a
    hostfile or a Slurm hostfile.

    Accepted:

    * short names and FQDNs: dot-separated labels of 1 to 63 ASCII letters,
      digits, ``-`` and ``_`` (a hyphen neither first nor last in a label),
      253 characters at most, an optional final dot (``node7``,
      ``node7.cluster.local.``, ``ip-10-0-0-5.ec2.internal``, a Kubernetes
      pod ``web-7d9f8b6c5d-x2x4z`` or ``web-0.nginx.default.svc``, an IDN
      in its ``xn--`` form). ``_`` goes beyond RFC 1123 because real hosts
      carry it (Docker Compose v1 containers ``proj_node_1``, Windows and
      NetBIOS names) and no output format gives it a meaning;
    * IPv4 addresses (``10.0.0.5``) and IPv6 addresses (``fe80::1``, with
      an interface zone ``fe80::1%eth0``).

    Rejected, each with the reason in the message:

    * anything but a ``str`` (bytes: decode first; :func:`check_host_names`
      does);
    * the empty name, an empty label (``a..b``, ``.a``), a label over 63
      characters or a name over 253;
    * white space (a trailing newline included), control and NUL
      characters, non-ASCII characters (a zero-width space looks like
      nothing): a rankfile or hostfile line would split or hide them;
    * ``=``, ``#``, ``,``, ``/``, ``@``, ``[``, ``]``, ``*`` and every other
      punctuation: rankfile syntax (``rank 0=host slot=0``), hostfile
      comments, Slurm host lists (``node[1-4],gpu1``);
    * ``:`` outside an IPv6 address (``host:2`` is Open MPI's slot syntax
      and ``host:port`` is an address, not a host), ``%`` outside an IPv6
      zone;
    * dotted all-numeric names that are no IPv4 address (``10.0.0.256``,
      ``1.2.3``): a mistyped address, not a name.

    Parameters
    ----------
    name : str
        The name.
    what : str
        How the error names it (``"hosts[3]"``, ``"job host"``).
    where : str, optional
        Where the name was read (``"line 4"``, ``"order file 'o.json'"``),
        added to the message.

    Returns
    -------
    str
        ``name``, unchanged.

    Raises
    ------
    RankoptInputError
        If ``name`` is not a str or not an accepted host name; the message
        names ``what``, the value, ``where`` and the reason.

    Examples
    --------
    >>> check_host_name("ip-10-0-0-5.ec2.internal")
    'ip-10-0-0-5.ec2.internal'
    >>> check_host_name("fe80::1%eth0")
    'fe80::1%eth0'
    >>> check_host_name("node1\\n", where="line 3")
    Traceback (most recent call last):
    ...
    rankopt.errors.RankoptInputError: host name 'node1\\n' on line 3: expected an RFC 1123 host name ...
    """
    at = f" on {where}" if where else ""
    if not isinstance(name, str):
        raise RankoptInputError(
            f"{what}{at} must be a str; got {type(name).__name__} {name!r} instead"
            + (" (decode bytes first)." if isinstance(name, (bytes, np.bytes_)) else ".")
        )
    problem = _host_name_problem(name)
    if problem is not None:
        raise RankoptInputError(
            f"{what} {_short_repr(name, _NAME_SHOWN)}{at}: expected {_HOST_RULE}; {problem}."
        )
    return name


def check_host_names(
    hosts: Any, n: int | None = None, name: str = "hosts", *, where: str = ""
) -> tuple[str, ...]:
    """Validate a sequence of host names (one per process); return them as a tuple of str.

    Every name must pass :func:`check_host_name`; bytes and NumPy byte
    strings are decoded (UTF-8) first, so a name stored as bytes is the
    name, not its ``repr``.

    Parameters
    ----------
    hosts : sequence of str
        Host of every process.
    n : int, optional
        Number of processes ``hosts`` must name.
    name : str
        Name of the argument, used in error messages.
    where : str, optional
        Where the names were read, added to the message.

    Raises
    ------
    RankoptInputError
        If ``hosts`` is not a sequence of names, has the wrong length, or a
        name is not accepted; the message names the position and the reason.

    Examples
    --------
    >>> check_host_names(["node1", b"node2"], 2)
    ('node1', 'node2')
    >>> check_host_names(["a", "b:2"])
    Traceback (most recent call last):
    ...
    rankopt.errors.RankoptInputError: `hosts` must hold host names; hosts[1] is 'b:2', expected ...
    """
    at = f" ({where})" if where else ""
    if isinstance(hosts, (str, bytes)) or not isinstance(hosts, (Sequence, np.ndarray)):
        raise RankoptInputError(
            f"`{name}`{at} must be a sequence of host names, one per process; "
            f"got {type(hosts).__name__} {_short_repr(hosts)} instead."
        )
    if isinstance(hosts, np.ndarray) and hosts.ndim != 1:
        raise RankoptInputError(
            f"`{name}`{at} must be a 1-D sequence of host names; got shape {hosts.shape}."
        )
    if n is not None and len(hosts) != n:
        raise RankoptInputError(
            f"`{name}`{at} must name the host of each of the {n} processes (one entry per "
            f"process); got {len(hosts)} names instead."
        )
    out = []
    for i, h in enumerate(hosts):
        if isinstance(h, (bytes, np.bytes_)):
            try:
                h = bytes(h).decode("utf-8")
            except UnicodeDecodeError:
                raise RankoptInputError(f"{name}[{i}]{at} is not UTF-8 text: {h!r}.") from None
        elif isinstance(h, np.str_):
            h = str(h)
        if not isinstance(h, str):
            raise RankoptInputError(
                f"`{name}`{at} must hold host names (str); {name}[{i}] is {type(h).__name__} {h!r}."
            )
        problem = _host_name_problem(h)
        if problem is not None:
            raise RankoptInputError(
                f"`{name}`{at} must hold host names; {name}[{i}] is "
                f"{_short_repr(h, _NAME_SHOWN)}, expected "
                f"{_HOST_RULE}; {problem}."
            )
        out.append(h)
    return tuple(out)


def _short_repr(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


#: Bounds of the straggle exponent: an even split up to a slowest flow at
#: ``K**-2`` of the uplink (beyond anything a probe has shown).
STRAGGLE_RANGE = (1.0, 2.0)
#: Where the probe's sharing test ran but its flows showed no shared limit, the
#: exponents the network is drawn over (its point estimate stays an even split): an
#: even split up to the largest exponent read on the emulated racks (1.02-1.44 over
#: 43 probes beside every tenant case), since a failed reading does not show that the
#: uplinks split evenly (on racks of 3, 2, 2 and 2 hosts it failed on two probes of six
#: beside a steady neighbour, where the others read 1.04-1.30).
UNREAD_STRAGGLE_RANGE = (1.0, 1.44)


def check_straggle(straggle: Any) -> float:
    """``straggle`` as a float in :data:`STRAGGLE_RANGE`, or a clear error."""
    lo, hi = STRAGGLE_RANGE
    try:
        s = float(straggle)
    except (TypeError, ValueError):
        s = float("nan")
    if isinstance(straggle, (bool, np.bool_)) or not lo <= s <= hi:
        raise RankoptInputError(
            f"`straggle` must be a number between {lo:g} (an even split of an uplink) and "
            f"{hi:g}; got {straggle!r}."
        )
    return s


def check_elastic(elastic: Any, *, reading: bool = False) -> float:
    """``elastic`` as a float in ``[0, 1]`` (``reading``: ``[-1, 1]``), or a clear error.

    ``0``: another tenant's load on an uplink keeps its rate whatever runs
    beside it (paced traffic); ``1``: it yields to every new flow as TCP
    flows through one bottleneck do
    (:func:`rankopt.models.network.tenant_flows`). A probe's ``reading``
    (:func:`rankopt.probe.sharing.elastic_share`) may be below 0: short
    transfers lost more than an even split to congestion-controlled load
    (:attr:`rankopt.Network.elastic` turns it into the model's value).
    """
    lo = -1.0 if reading else 0.0
    try:
        e = float(elastic)
    except (TypeError, ValueError):
        e = float("nan")
    if isinstance(elastic, (bool, np.bool_)) or not lo <= e <= 1.0:
        what = "the probe's `elastic` reading" if reading else "`elastic`"
        raise RankoptInputError(
            f"{what} must be a number between {lo:g} and 1 (1: other tenants' load yields to "
            f"more flows as TCP does; 0: it keeps its rate); got {elastic!r}."
        )
    return e
