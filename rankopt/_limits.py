"""The bounds on every size-like input, and the one helper that enforces them.

Every entry point (the API, the file readers, the command line, the launchers)
checks a size-like input against its bound here *before* anything is
allocated or any loop starts, so the work stays proportional to the input and
a mistyped size is an error that names the argument, the value, the bound and
where it came from, not a hang or a ``MemoryError``.

Bounds
------
=========================  ==================  ==============================================
constant                   value               what it bounds
=========================  ==================  ==============================================
:data:`MAX_N`              16,384              processes in a matrix file, probe plan or job
:data:`MAX_ARRAY_BYTES`    2 GiB               one array read from a ``.npy``/``.npz``
:data:`MAX_NPZ_BYTES`      6 GiB               all arrays of one ``.npz``, together
:data:`MAX_NPZ_MEMBERS`    64                  arrays in one ``.npz`` archive
:data:`MAX_TEXT_BYTES`     256 MiB             a text file (CSV, JSON, order, workload)
:data:`MAX_NESTING`        64                  nesting depth of JSON (files, ``.npz`` text)
:data:`MAX_SEGMENTS`       65,536              segments of a pipelined chain broadcast
:data:`MAX_DRAWS`          1,024               networks drawn for ``solve(robust=...)``, and
                                               at most 2 GiB of drawn n x n matrices
:data:`MAX_COUNT`          1e12                calls of one workload entry (``count``)
:data:`MAX_ITERATIONS`     2**53               every positive integer option (``max_iter``)
:data:`MAX_PROBE_BYTES`    1 GiB               a probe message (``latency_bytes``,
                                               ``bandwidth_bytes``)
:data:`MAX_PROBE_REPEATS`  10,000              probe repeats and warm-up rounds
:data:`MAX_PROBE_FLOWS`    1,024               concurrent probe flows (``uplink_flows``,
                                               ``bw_concurrency``)
:data:`MAX_VERIFY_BYTES`   2 GiB               a message size timed by ``rankopt verify``
:data:`MAX_VERIFY_SIZES`   64                  message sizes timed by one ``rankopt verify``
:data:`MAX_REPEATS`        100,000             timing repeats (``verify --repeats``)
:data:`MAX_TIMEOUT`        604,800 s (7 days)  rendezvous, probe and verify timeouts
                                               (rendezvous: at least 0.1 s)
:data:`MAX_DPI`            1,200               the resolution of ``rankopt plot``
=========================  ==================  ==============================================

Message sizes (``nbytes``), latencies and bandwidths are ranges of values, not
sizes; they are in :data:`rankopt._validation.RANGES` (``nbytes`` at most
1e18 bytes; the chain's segment count bounds the work it causes).

Where they are checked: the ``.npy``/``.npz``/text readers
(:mod:`rankopt._files`, :mod:`rankopt.network.io`, order files), the model
factory (chain segments, workload counts), ``solve(robust=...)``, the probe
settings (``--probe-option`` and the ``rankopt probe`` flags), ``rankopt
probe --plan -n``, the launchers' variables and timeouts
(:mod:`rankopt.adapters._env`), ``rankopt verify`` and ``rankopt plot``;
integer options through :func:`rankopt._validation.check_positive`.

Why these values: an ``n x n`` float64 matrix at :data:`MAX_N` is 2 GiB and the
solvers hold a few copies; a chain broadcast's cost is ``O(n + segments)``
per evaluation; a robust objective prices every order once per draw. Each
bound is far above what a real job needs and below what exhausts a node.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from rankopt._validation import MAX_INTEGER, RankoptInputError, check_positive
from rankopt.errors import RankoptLimitError

__all__ = [
    "MAX_ARRAY_BYTES",
    "MAX_COUNT",
    "MAX_DPI",
    "MAX_DRAWS",
    "MAX_ITERATIONS",
    "MAX_N",
    "MAX_NESTING",
    "MAX_NPZ_BYTES",
    "MAX_NPZ_MEMBERS",
    "MAX_PROBE_BYTES",
    "MAX_PROBE_FLOWS",
    "MAX_PROBE_REPEATS",
    "MAX_REPEATS",
    "MAX_SEGMENTS",
    "MAX_TEXT_BYTES",
    "MAX_TIMEOUT",
    "MAX_VERIFY_BYTES",
    "MAX_VERIFY_SIZES",
    "PROBE_LIMITS",
    "RankoptLimitError",
    "check_bound",
    "check_chain_segments",
    "check_nesting",
    "check_probe_settings",
    "json_depth",
    "quote_name",
]

#: Most processes in a matrix file, a probe plan or a launched job: an n x n
#: float64 matrix at n = 16,384 is 2 GiB, and the solvers hold a few such copies.
MAX_N = 16_384
#: Most bytes of one array loaded from a ``.npy`` / ``.npz`` (a float64 matrix at MAX_N).
MAX_ARRAY_BYTES = 8 * MAX_N * MAX_N
#: Most bytes of all the arrays of one ``.npz``, together (three matrices at MAX_N).
MAX_NPZ_BYTES = 3 * MAX_ARRAY_BYTES
#: Most arrays in one ``.npz`` archive (rankopt's own files hold about 15).
MAX_NPZ_MEMBERS = 64
#: Most bytes of a text file (CSV, JSON, order); parsing text costs several times its size.
MAX_TEXT_BYTES = 256 * 2**20
#: Deepest nesting of JSON (lists and mappings) rankopt reads; its own files nest 4 deep.
MAX_NESTING = 64
#: Most segments of a pipelined chain broadcast (``nbytes / segment_size``).
MAX_SEGMENTS = 1 << 16
#: Most networks drawn for a robust objective (``solve(robust=...)``).
MAX_DRAWS = 1024
#: Most calls of one workload entry (a million calls a second for 11 days).
MAX_COUNT = 1e12
#: Largest positive integer option (``max_iter``, ``max_evals``): 2**53, the
#: largest integer a float64 holds exactly (enforced by
#: :func:`rankopt._validation.check_positive`, which defines it).
MAX_ITERATIONS = MAX_INTEGER
#: Largest probe message, bytes (``latency_bytes``, ``bandwidth_bytes``).
MAX_PROBE_BYTES = 1 << 30
#: Most repeats (and warm-up rounds) of one probe measurement.
MAX_PROBE_REPEATS = 10_000
#: Most concurrent flows of one probe test (``uplink_flows``, ``bw_concurrency``).
MAX_PROBE_FLOWS = 1024
#: Largest message size ``rankopt verify`` times, bytes (a buffer of it is allocated per rank).
MAX_VERIFY_BYTES = 1 << 31
#: Most message sizes one ``rankopt verify`` times.
MAX_VERIFY_SIZES = 64
#: Most timing repeats (``rankopt verify --repeats``).
MAX_REPEATS = 100_000
#: Longest timeout or time limit, seconds (7 days).
MAX_TIMEOUT = 7 * 86400.0
#: Highest resolution of a figure, dots per inch.
MAX_DPI = 1200

#: Upper bound of each probe setting (:class:`rankopt.probe._common.ProbeParams`).
PROBE_LIMITS: dict[str, float] = {
    "latency_bytes": MAX_PROBE_BYTES,
    "bandwidth_bytes": MAX_PROBE_BYTES,
    "repeats": MAX_PROBE_REPEATS,
    "bandwidth_repeats": MAX_PROBE_REPEATS,
    "warmup": MAX_PROBE_REPEATS,
    "bw_concurrency": MAX_PROBE_FLOWS,
    "uplink_flows": MAX_PROBE_FLOWS,
    "timeout": MAX_TIMEOUT,
}


def quote_name(name: str) -> str:
    """How a message names an argument: ```nbytes``` for the API, ``--nbytes`` for a flag.

    Examples
    --------
    >>> quote_name("nbytes"), quote_name("--nbytes")
    ('`nbytes`', '--nbytes')
    """
    return name if name.startswith("-") else f"`{name}`"


def _fmt(value: Any) -> str:
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return f"{int(value):,}" if abs(int(value)) < 10**15 else f"{float(value):.3g}"
    if isinstance(value, (float, np.floating)):
        return f"{float(value):.6g}"
    return repr(value)


def check_bound(
    value: Any,
    name: str,
    limit: float,
    where: str | None = None,
    *,
    minimum: float | None = None,
    integer: bool = False,
    unit: str = "",
    hint: str = "",
) -> Any:
    """Check a size-like ``value`` against its bound; return it (an int when ``integer``).

    Parameters
    ----------
    value : int or float
        The value, as given (a bool, a string, NaN or inf is refused).
    name : str
        The argument or option, as the caller wrote it (``"nbytes"``, ``"--sizes"``).
    limit : float
        Largest accepted value (one of this module's constants).
    where : str, optional
        Where the value came from (a file, a command), prefixed to the message.
    minimum : float, optional
        Smallest accepted value.
    integer : bool
        Whether the value must be a whole number (``3.0`` is accepted as 3).
    unit : str
        Unit named after the numbers (``"bytes"``, ``"s"``).
    hint : str
        What to do instead, appended to the message.

    Returns
    -------
    int or float

    Raises
    ------
    RankoptLimitError
        If ``value`` is above ``limit``, below ``minimum``, not finite, or not
        a (whole) number. The message names the argument, the value, the
        bound and where.

    Examples
    --------
    >>> check_bound(8, "n", MAX_N, integer=True)
    8
    >>> check_bound(10**9, "n", MAX_N, "rankopt.schedule()", integer=True)
    Traceback (most recent call last):
    ...
    rankopt.errors.RankoptLimitError: rankopt.schedule(): `n` must be at most 16,384; got 1,000,000,000.
    """
    pre = f"{where}: " if where else ""
    u = f" {unit}" if unit else ""
    tail = f" ({hint})" if hint else ""
    ok = (int, float, np.integer, np.floating)
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, ok):
        kind = "an integer" if integer else "a number"
        raise RankoptLimitError(f"{pre}{quote_name(name)} must be {kind}; got {value!r} instead.")
    if isinstance(value, (float, np.floating)) and not math.isfinite(value):
        raise RankoptLimitError(f"{pre}{quote_name(name)} must be finite; got {value!r}.")
    if integer:
        if isinstance(value, (float, np.floating)) and value != math.floor(value):
            raise RankoptLimitError(
                f"{pre}{quote_name(name)} must be a whole number; got {value!r}."
            )
        value = int(value)
    if value > limit:
        raise RankoptLimitError(
            f"{pre}{quote_name(name)} must be at most {_fmt(limit)}{u}; got {_fmt(value)}{u}{tail}."
        )
    if minimum is not None and value < minimum:
        raise RankoptLimitError(
            f"{pre}{quote_name(name)} must be at least {_fmt(minimum)}{u}; got {_fmt(value)}{u}{tail}."
        )
    return value


def check_chain_segments(
    nbytes: float | None,
    segment_size: float | None,
    where: str | None = None,
    *,
    default: float = 1 << 16,
) -> int:
    """The number of chain segments ``ceil(nbytes / segment_size)``, checked before any allocation.

    ``segment_size=None`` is the default segment, ``default`` (the caller
    passes :data:`rankopt.models.schedule.DEFAULT_SEGMENT_SIZE`); ``nbytes=None``
    is one segment.

    Raises
    ------
    RankoptLimitError
        If ``segment_size`` is not a positive finite number of at least one
        byte, or the count exceeds :data:`MAX_SEGMENTS`.

    Examples
    --------
    >>> check_chain_segments(4e6, 1e6)
    4
    """
    if segment_size is not None:
        check_bound(segment_size, "segment_size", 1e18, where, minimum=1.0, unit="bytes")
    if nbytes is None:
        return 1
    seg = float(default if segment_size is None else segment_size)
    count = float(nbytes) / seg
    if not count <= MAX_SEGMENTS:
        pre = f"{where}: " if where else ""
        raise RankoptLimitError(
            f"{pre}a chain broadcast of `nbytes`={float(nbytes):g} bytes in segments of "
            f"{seg:g} bytes has {count:.4g} segments; rankopt models at most {MAX_SEGMENTS:,} "
            f"(`nbytes` <= {seg * MAX_SEGMENTS:.4g} bytes at this segment size, or "
            f"`segment_size` >= {float(nbytes) / MAX_SEGMENTS:.4g} bytes)."
        )
    return max(1, math.ceil(count - 1e-12))


_OPEN = np.zeros(256, dtype=bool)
_OPEN[[ord("["), ord("{")]] = True
_BRACKET = _OPEN.copy()
_BRACKET[[ord("]"), ord("}")]] = True


def json_depth(text: str | bytes) -> int:
    """The deepest nesting of lists and mappings in JSON text, without parsing it.

    Brackets inside strings are skipped (a quote preceded by an odd number of
    backslashes does not end a string). Vectorised, linear in the text and
    without recursion, so it is safe and fast on any input; malformed text
    gives a number the parser then rejects anyway.

    Examples
    --------
    >>> json_depth('{"a": [[1, 2], [3, "]]]\\\\"]]}')
    3
    """
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else bytes(text)
    arr = np.frombuffer(data, dtype=np.uint8)
    brackets = np.flatnonzero(_BRACKET[arr])
    if brackets.size == 0:
        return 0
    quotes = np.flatnonzero(arr == ord('"'))
    if quotes.size:
        slashes = np.flatnonzero(arr == ord("\\"))
        if slashes.size:  # drop quotes escaped by an odd run of backslashes
            new_run = np.ones(slashes.size, dtype=bool)
            new_run[1:] = slashes[1:] != slashes[:-1] + 1
            start = np.maximum.accumulate(np.where(new_run, slashes, 0))
            prev = quotes - 1
            k = np.minimum(np.searchsorted(slashes, prev), slashes.size - 1)
            hit = slashes[k] == prev
            run = np.where(hit, prev - start[k] + 1, 0)
            quotes = quotes[run % 2 == 0]
        inside = np.searchsorted(quotes, brackets) % 2 == 1  # an odd number of quotes before
        brackets = brackets[~inside]
        if brackets.size == 0:
            return 0
    step = np.where(_OPEN[arr[brackets]], 1, -1)
    return max(int(np.cumsum(step).max()), 0)


def check_nesting(text: str | bytes, where: str) -> None:
    """Refuse JSON text nested deeper than :data:`MAX_NESTING`, before it is parsed.

    Raises
    ------
    RankoptLimitError
        If the text nests lists or mappings more than :data:`MAX_NESTING` deep.
    """
    depth = json_depth(text)
    if depth > MAX_NESTING:
        raise RankoptLimitError(
            f"{where}: JSON nested {depth} levels deep; rankopt reads at most {MAX_NESTING}."
        )


def check_probe_settings(
    settings: dict[str, Any], where: str | None = None, *, flags: bool = False
) -> dict[str, Any]:
    """Check the probe settings that are sizes against :data:`PROBE_LIMITS`; return them.

    Other settings (and their types and lower bounds) are left to the probe's
    own validation; unknown names pass through to be reported there. With
    ``flags``, errors name the command-line flags (``--latency-bytes``).

    Examples
    --------
    >>> check_probe_settings({"repeats": 3, "bandwidth": False})
    {'repeats': 3, 'bandwidth': False}
    """
    for key, value in settings.items():
        limit = PROBE_LIMITS.get(key)
        if limit is None:
            continue
        integer = key != "timeout"
        low = 0 if key == "warmup" else (None if key == "timeout" else 1)
        unit = "bytes" if key.endswith("_bytes") else ("s" if key == "timeout" else "")
        name = "--" + key.replace("_", "-") if flags else key
        if key == "timeout" and isinstance(value, (int, float)) and not value > 0:
            pre = f"{where}: " if where else ""
            raise RankoptLimitError(f"{pre}{quote_name(name)} must be positive; got {value!r}.")
        check_bound(value, name, limit, where, minimum=low, integer=integer, unit=unit)
    return settings


def check_ranks(n: Any, where: str, name: str = "n") -> int:
    """A process count: a whole number from 2 to :data:`rankopt._limits.MAX_N`.

    The one check of ``n`` for every model, schedule and engine call;
    ``where`` names the call in the error.

    >>> check_ranks(8, "schedule()")
    8
    """
    count = int(check_positive(n, name, integer=True))
    check_bound(count, name, MAX_N, where, integer=True)
    if count < 2:
        raise RankoptInputError(f"`{name}` must be at least 2 ({where}); got {count}.")
    return count
