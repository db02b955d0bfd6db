"""Sizes and rates: one parser and one formatter for every option and report.

Sizes (message bytes) follow the convention of nccl-tests and the OSU
benchmarks for the bare letters, and the SI/IEC one where the unit is spelt
out:

============================  =====================  ======================
written                       means                  example
============================  =====================  ======================
a number                      bytes                  ``1e6``, ``4096``
``K``, ``M``, ``G``, ``T``    powers of 1024         ``16M`` = 16 MiB
``KiB``, ``MiB``, ...         powers of 1024         ``16MiB``
``kB``, ``MB``, ``GB``        powers of 1000         ``64MB`` = 64e6 B
============================  =====================  ======================

Rates are bytes per second unless the unit says bits:

======================================  ================================
written                                 means
======================================  ================================
a number                                bytes/s
``B/s``, ``kB/s``, ``MB/s``, ``GB/s``   bytes/s (powers of 1000)
``Mbit/s``, ``25Gbit/s``, ``200mbit``   bits/s (as ``tc`` writes them)
======================================  ================================

``Mbps`` and its kin are refused: ``tc`` reads ``mbps`` as megabytes per
second while most people mean megabits, so the caller must say which.

The formatters print a size in the unit family it is a whole multiple of —
binary when it is one (``16 MiB``), else decimal (``64 MB``) — so a size
comes back in the unit it was given; rates print in bytes/s (or bits/s with
``bits=True``).
"""

from __future__ import annotations

import math
import re

from rankopt._validation import RankoptInputError

__all__ = [
    "format_rate", "format_size", "parse_rate", "parse_rates", "parse_size", "parse_sizes",
]  # fmt: skip

_SIZE_UNITS = {
    "": 1, "b": 1,
    "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40, "p": 1 << 50,
    "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40, "pib": 1 << 50,
    "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12, "pb": 10**15,
}  # fmt: skip
_RATE_UNITS = {
    "": 1.0, "b/s": 1.0, "kb/s": 1e3, "mb/s": 1e6, "gb/s": 1e9, "tb/s": 1e12,
    "bit": 0.125, "kbit": 125.0, "mbit": 1.25e5, "gbit": 1.25e8, "tbit": 1.25e11,
}  # fmt: skip
_NUMBER = r"([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)"
_SIZE_RE = re.compile(rf"{_NUMBER}\s*([a-zA-Z]*)")
_RATE_RE = re.compile(rf"{_NUMBER}\s*([a-zA-Z]*(?:/s)?)")


def _bad(name: str, value: object, what: str, examples: str) -> RankoptInputError:
    return RankoptInputError(f"{name} must be {what} such as {examples}; got {value!r}.")


def parse_size(value: str | float, name: str = "size") -> int:
    """A message size in bytes from ``"16M"``, ``"16MiB"``, ``"64MB"``, ``"1e6"`` or a number.

    Parameters
    ----------
    value : str or number
        The size; see the module's table for the units.
    name : str
        The option or argument, named in the error.

    Returns
    -------
    int
        Bytes (a fraction of a byte is rounded to the nearest byte).

    Raises
    ------
    RankoptInputError
        A malformed size, an unknown unit, or one that is not a finite
        non-negative number of bytes.

    Examples
    --------
    >>> parse_size("16M"), parse_size("16 MiB"), parse_size("64MB"), parse_size("1e6")
    (16777216, 16777216, 64000000, 1000000)
    >>> parse_size("16 megs", "--nbytes")
    Traceback (most recent call last):
    ...
    rankopt.errors.RankoptInputError: --nbytes must be a size such as 16M, 16MiB, 64MB or 1e6; got '16 megs'.
    """
    if isinstance(value, bool):
        raise _bad(name, value, "a size", "16M, 16MiB, 64MB or 1e6")
    if isinstance(value, (int, float)):
        number, scale = float(value), 1
    else:
        m = _SIZE_RE.fullmatch(str(value).strip())
        unit = m.group(2).lower() if m else ""
        if m is None or unit not in _SIZE_UNITS:
            raise _bad(name, value, "a size", "16M, 16MiB, 64MB or 1e6")
        number, scale = float(m.group(1)), _SIZE_UNITS[unit]
    nbytes = number * scale
    if not (math.isfinite(nbytes) and nbytes >= 0):
        raise RankoptInputError(
            f"{name} must be a finite, non-negative number of bytes; got {value!r}."
        )
    return int(round(nbytes))


def parse_sizes(text: str, name: str = "--sizes") -> list[int]:
    """Comma-separated sizes -> bytes, each as :func:`parse_size` reads it.

    Examples
    --------
    >>> parse_sizes("4K, 1M,100")
    [4096, 1048576, 100]
    """
    items = str(text).split(",")
    return [parse_size(item, name) for item in items]


def parse_rate(value: str | float, name: str = "rate") -> float:
    """A rate in bytes/s from ``"3GB/s"``, ``"25Gbit/s"``, ``"200mbit"`` or a number.

    Parameters
    ----------
    value : str or number
        The rate; see the module's table for the units.
    name : str
        The option or argument, named in the error.

    Returns
    -------
    float
        Bytes per second, positive and finite.

    Examples
    --------
    >>> parse_rate("25Gbit/s"), parse_rate("200mbit"), parse_rate("3 GB/s"), parse_rate(1e9)
    (3125000000.0, 25000000.0, 3000000000.0, 1000000000.0)
    >>> parse_rate("10Gbps", "--uplink-bandwidth")
    Traceback (most recent call last):
    ...
    rankopt.errors.RankoptInputError: --uplink-bandwidth: 'Gbps' is ambiguous (bits or bytes?); write Gbit/s or GB/s; got '10Gbps'.
    """
    if isinstance(value, bool):
        raise _bad(name, value, "a rate", "25Gbit/s, 3GB/s, 200mbit or 1e9 (bytes/s)")
    if isinstance(value, (int, float)):
        rate = float(value)
    else:
        text = str(value).strip()
        m = _RATE_RE.fullmatch(text)
        unit = m.group(2).lower() if m else ""
        if m is not None and unit.endswith("ps"):
            raise RankoptInputError(
                f"{name}: {m.group(2)!r} is ambiguous (bits or bytes?); write "
                f"{m.group(2)[:-2]}it/s or {m.group(2)[:-3]}B/s; got {value!r}."
            )
        if unit.endswith("bit/s"):
            unit = unit[:-2]
        if m is None or unit not in _RATE_UNITS:
            raise _bad(name, value, "a rate", "25Gbit/s, 3GB/s, 200mbit or 1e9 (bytes/s)")
        rate = float(m.group(1)) * _RATE_UNITS[unit]
    if not (math.isfinite(rate) and rate > 0):
        raise RankoptInputError(f"{name} must be a positive, finite rate; got {value!r}.")
    return rate


def parse_rates(text: str, name: str) -> list[float]:
    """Comma-separated rates -> bytes/s, each as :func:`parse_rate` reads it.

    Examples
    --------
    >>> parse_rates("1Gbit/s, 250mbit", "--rates")
    [125000000.0, 31250000.0]
    """
    return [parse_rate(item, name) for item in str(text).split(",")]


def _trim(x: float) -> str:
    return f"{x:.4g}"


def format_size(nbytes: float) -> str:
    """Bytes in the unit family they are a whole multiple of: binary first, then decimal.

    Examples
    --------
    >>> format_size(16 * 2**20), format_size(64e6), format_size(4096), format_size(100)
    ('16 MiB', '64 MB', '4 KiB', '100 B')
    >>> format_size(3.5 * 2**30), format_size(123456789)
    ('3.5 GiB', '117.7 MiB')
    """
    x = float(nbytes)
    if not math.isfinite(x):
        return f"{x} B"
    ax = abs(x)
    binary = (("PiB", 1 << 50), ("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20),
              ("KiB", 1 << 10))  # fmt: skip
    decimal = (("PB", 1e15), ("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3))
    for family in (binary, decimal):
        # the largest unit it reaches; kept when the figure is short (as given)
        unit, f = next(((u, f) for u, f in family if ax >= f), ("B", 1))
        if unit != "B" and ax * 100 / f == round(ax * 100 / f):
            return f"{_trim(x / f)} {unit}"
    unit, f = next(((u, f) for u, f in binary if ax >= f), ("B", 1))
    return f"{_trim(x / f)} {unit}"


def format_rate(rate: float, *, bits: bool = False) -> str:
    """Bytes/s as ``"3.12 GB/s"``, or bits/s as ``"25 Gbit/s"`` with ``bits``.

    Examples
    --------
    >>> format_rate(3.125e9), format_rate(3.125e9, bits=True), format_rate(12.0)
    ('3.12 GB/s', '25 Gbit/s', '12 B/s')
    """
    x = float(rate)
    if not math.isfinite(x):
        return "inf" if x > 0 else f"{x}"
    if bits:
        x *= 8
        units = (("Tbit/s", 1e12), ("Gbit/s", 1e9), ("Mbit/s", 1e6), ("kbit/s", 1e3))
        last = "bit/s"
    else:
        units = (("TB/s", 1e12), ("GB/s", 1e9), ("MB/s", 1e6), ("kB/s", 1e3))
        last = "B/s"
    for unit, f in units:
        if abs(x) >= f:
            return f"{x / f:.3g} {unit}"
    return f"{x:.3g} {last}"
