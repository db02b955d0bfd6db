"""Measure the real gain of an order on the job's own network: ``rankopt verify``.

Contents
--------
default_sizes
    The sizes verify times: a workload's, else 4 KB ... 64 MB in powers of 4.
measure_orders
    The protocol: for every size, the launch order (A) and the candidate (B)
    visited in turn, A B B A ..., each visit one untimed call and then
    ``block`` timed calls of that order back to back (as a job runs it), until
    enough pairs for an interval (or a time budget) are in.
ratio_interval
    Speedup (median A / median B) with its interval: the wider of a paired
    bootstrap interval and the exact order-statistic interval of the median
    paired ratio (:func:`sign_interval`).
VerifyResult, summarize
    Per size and overall: times, algbw and busbw (nccl-tests' definitions),
    speedup with its interval, and a verdict.
APPLY, NO_GAIN, WORSE
    The verdicts.

The engines (MPI through mpi4py, torch Gloo) time one call through a timer
object (:class:`Timer`) in :mod:`rankopt.adapters.verify`; nothing here
imports mpi4py or torch. Every timer returns the same number on every rank
(the slowest rank's time), so the decisions of the protocol -- when to stop
repeating, the verdict -- are the same on every rank.

Intervals. Times on a shared machine are heavy-tailed and often bimodal (a
call either shares its core or not), and a bootstrap of medians over a few
pairs is then too narrow: with 8 pairs of two identical orders it calls a
gain about one time in twenty. The interval is therefore also never narrower
than the distribution-free one of :func:`sign_interval` (a sign test on the
pairs' ratios), which needs the candidate to win nearly every pair when
there are few of them (7 of 8 at 90%) and needs at least 5 pairs to exclude
1 at all.

Verdict rule. With ``r`` the measured speedup of the candidate and
``[lo, hi]`` its 90% interval: **apply** when ``lo > 1`` and ``r >= 1 +
min_gain``; **worse** when ``hi < 1`` and ``r <= 1 - min_gain``; otherwise
**no measurable gain**. A gain or loss must also replicate: the pairs of the
first and of the second half of the run, each on its own, must show a speedup
on the same side of 1 by at least half of ``min_gain`` (:func:`replicates`);
otherwise the load drifted under the measurement and the verdict is **no
measurable gain**. The overall verdict judges the total time of one call of
every size (the workload's counts as weights when one is given).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
from numpy.typing import ArrayLike, NDArray

from rankopt._limits import (
    MAX_REPEATS,
    MAX_TIMEOUT,
    MAX_VERIFY_BYTES,
    MAX_VERIFY_SIZES,
    check_bound,
    quote_name,
)
from rankopt._validation import RankoptInputError
from rankopt.units import format_size, parse_size

__all__ = [
    "APPLY",
    "NO_GAIN",
    "WORSE",
    "Timer",
    "VerifyResult",
    "bus_factor",
    "default_sizes",
    "measure_orders",
    "parse_sizes",
    "ratio_interval",
    "sign_interval",
    "summarize",
    "synthetic_timer",
    "verdict",
]

APPLY = "apply"
NO_GAIN = "no measurable gain"
WORSE = "worse"

#: Level of the speedup's interval.
LEVEL = 0.90
#: A measured gain smaller than this fraction is no gain, whatever its interval.
MIN_GAIN = 0.02
#: Largest ``min_gain`` accepted (an order measured 11 times faster).
MAX_MIN_GAIN = 10.0
#: Bootstrap resamples behind an interval.
BOOTSTRAP = 2000
#: Timed calls of an order back to back at each visit (:func:`measure_orders`).
BLOCK = 3


class Timer(Protocol):
    """One timed call of the collective: ``timer(which, nbytes) -> seconds``.

    ``which`` is 0 (launch order) or 1 (candidate). The time returned is the
    slowest rank's, the same on every rank.
    """

    def __call__(self, which: int, nbytes: int) -> float: ...


def default_sizes(workload: Sequence[Any] | None = None) -> list[int]:
    """The workload's distinct sizes, else 4 KiB ... 64 MiB in powers of 4.

    Examples
    --------
    >>> [s >> 10 for s in default_sizes()]
    [4, 16, 64, 256, 1024, 4096, 16384, 65536]
    """
    if workload:
        return sorted({int(c.nbytes) for c in workload})
    return [4 << (2 * k + 10) for k in range(8)]


def parse_sizes(text: str) -> list[int]:
    """``"4K,1M,64M"`` (or bytes) -> sizes in bytes, as :func:`rankopt.units.parse_size` reads them.

    At most :data:`rankopt._limits.MAX_VERIFY_SIZES` sizes, each from 1 byte
    to :data:`rankopt._limits.MAX_VERIFY_BYTES` (a buffer of it is allocated
    on every rank), checked before anything is allocated.

    Examples
    --------
    >>> parse_sizes("4K, 1M,100")
    [4096, 1048576, 100]
    """
    items = str(text).split(",")
    check_bound(len(items), "--sizes", MAX_VERIFY_SIZES, unit="sizes", integer=True)
    out = []
    for item in items:
        value = parse_size(item, "--sizes")
        if not value >= 1:
            raise RankoptInputError(f"--sizes must be at least 1 byte; got {item.strip()!r}.")
        check_bound(value, "--sizes", MAX_VERIFY_BYTES, unit="bytes")
        out.append(value)
    return out


def check_timing(
    sizes: Sequence[int] | None,
    repeats: int | None,
    budget_s: float,
    timeout: float,
    where: str | None = "verify",
    *,
    flags: bool = False,
    min_gain: float = MIN_GAIN,
    block: int = BLOCK,
) -> None:
    """Validate verify's timing options before any process group or buffer is made.

    ``sizes``: 1 to :data:`~rankopt._limits.MAX_VERIFY_SIZES` sizes of 1 byte
    to :data:`~rankopt._limits.MAX_VERIFY_BYTES`; ``repeats``: 1 to
    :data:`~rankopt._limits.MAX_REPEATS`; ``budget_s`` and ``timeout``:
    positive and finite, at most :data:`~rankopt._limits.MAX_TIMEOUT` s;
    ``min_gain``: a fraction from 0 to :data:`MAX_MIN_GAIN`; ``block``: 1 to
    :data:`~rankopt._limits.MAX_REPEATS`.

    Raises
    ------
    RankoptInputError
        Naming the option and the value.
    """
    names = (
        ("--sizes", "--repeats", "--budget", "--verify-timeout", "--min-gain", "--block")
        if flags
        else ("sizes", "repeats", "budget_s", "timeout", "min_gain", "block")
    )
    pre = f"{where}: " if where else ""
    if sizes is not None:
        if isinstance(sizes, (str, bytes)) or not isinstance(sizes, Sequence):
            raise RankoptInputError(
                f"{pre}{quote_name(names[0])} must be a list of byte counts; got {sizes!r}."
            )
        check_bound(len(sizes), names[0], MAX_VERIFY_SIZES, where, integer=True)
        for s in sizes:
            check_bound(s, names[0], MAX_VERIFY_BYTES, where, minimum=1, integer=True, unit="bytes")
    if repeats is not None:
        check_bound(repeats, names[1], MAX_REPEATS, where, minimum=1, integer=True)
    for name, value in ((names[2], budget_s), (names[3], timeout)):
        check_bound(value, name, MAX_TIMEOUT, where, unit="s")
        if not value > 0:
            raise RankoptInputError(
                f"{pre}{quote_name(name)} must be positive seconds; got {value!r}."
            )
    check_bound(
        min_gain, names[4], MAX_MIN_GAIN, where, minimum=0.0, hint="(a fraction: 0.05 is 5%)"
    )
    check_bound(block, names[5], MAX_REPEATS, where, minimum=1, integer=True)


def bus_factor(collective: str, n: int) -> float:
    """nccl-tests' bus bandwidth factor: ``busbw = algbw * factor``.

    allreduce ``2(n-1)/n``; allgather, reduce_scatter, alltoall ``(n-1)/n``;
    broadcast, reduce 1.
    """
    if collective == "allreduce":
        return 2.0 * (n - 1) / n
    if collective in ("allgather", "reduce_scatter", "alltoall"):
        return (n - 1) / n
    return 1.0


def measure_orders(
    timer: Timer,
    sizes: Sequence[int],
    *,
    repeats: int | None = None,
    min_repeats: int = 6,
    max_repeats: int = 40,
    budget_s: float = 10.0,
    warmup: int = 1,
    block: int = BLOCK,
    settle: int = 1,
    callback: Callable[[int, list[float], list[float]], Any] | None = None,
) -> list[tuple[list[float], list[float]]]:
    """Time the launch order (A) and the candidate (B) in turn at every size.

    For each size: ``warmup`` untimed calls of each order, then rounds of
    two visits, one per order (which goes first alternates: A B, B A, ...,
    so drift and caching hit both alike). A visit is ``settle`` untimed
    calls and then ``block`` timed calls of its order back to back; the
    ``j``-th timed calls of a round's two visits make a pair. Rounds go on
    until ``repeats`` pairs, or -- without ``repeats`` -- at least
    ``min_repeats`` and then until ``budget_s`` seconds of timed calls or
    ``max_repeats`` pairs. The stopping rule uses the timer's numbers only,
    which are the same on every rank.

    Why visits: a job runs its collective back to back, and beside a TCP
    neighbour a call timed right after the other order's traffic is not
    what that job meets (the neighbour's flows are still reacting to the
    other order; measured on the testbed it read 14-20% more gain than jobs
    of one order). The settle call lets the network reach the visiting
    order's state before it is timed. ``block=1, settle=0`` is plain
    alternation, A B B A ..., one call per visit.

    ``callback(nbytes, times_a, times_b)`` is called after each size (a
    row of progress as it is measured).

    Returns
    -------
    list of (times_a, times_b)
        One pair of lists per size, in seconds, in time order.
    """
    block = check_bound(block, "block", MAX_REPEATS, "measure_orders()", minimum=1, integer=True)
    settle = check_bound(settle, "settle", MAX_REPEATS, "measure_orders()", minimum=0, integer=True)
    out = []
    for nbytes in sizes:
        for _ in range(warmup):
            timer(0, nbytes)
            timer(1, nbytes)
        a: list[float] = []
        b: list[float] = []
        spent = 0.0
        k = 0  # rounds
        while True:
            if repeats is not None:
                if len(a) >= repeats:
                    break
            elif len(a) >= max_repeats or (len(a) >= min_repeats and spent >= budget_s):
                break
            calls = min(block, (max_repeats if repeats is None else repeats) - len(a))
            first = k % 2
            t: dict[int, list[float]] = {}
            for which in (first, 1 - first):
                for _ in range(settle):
                    timer(which, nbytes)
                t[which] = [timer(which, nbytes) for _ in range(calls)]
            a.extend(t[0])
            b.extend(t[1])
            spent += sum(t[0]) + sum(t[1])
            k += 1
        out.append((a, b))
        if callback is not None:
            callback(int(nbytes), a, b)
    return out


def size_row(nbytes: int, a: Sequence[float], b: Sequence[float]) -> str:
    """One size's progress line: the medians of both orders and their ratio.

    Examples
    --------
    >>> size_row(4096, [2e-5, 2.2e-5], [1e-5, 1.2e-5])
    '4 KiB: launch order 21 us, this order 11 us (1.91x, 2 pairs)'
    """
    ma, mb = float(np.median(a)), float(np.median(b))
    ratio = f"{ma / mb:.3g}x" if mb > 0 else "?"
    return (
        f"{format_size(nbytes)}: launch order {ma * 1e6:.3g} us, this order {mb * 1e6:.3g} us "
        f"({ratio}, {len(a)} pair{'' if len(a) == 1 else 's'})"
    )


def sign_interval(a: ArrayLike, b: ArrayLike, *, level: float = LEVEL) -> tuple[float, float]:
    """Exact distribution-free interval of the median paired ratio ``a[i] / b[i]``.

    The order statistics ``[r_(k), r_(n-k+1)]`` of the ``n`` ratios, with
    ``k`` the largest for which a binomial(n, 1/2) count below ``k`` has
    probability at most ``(1 - level) / 2`` (the interval that inverts the
    sign test). With too few pairs for any such ``k`` (fewer than 5 at 90%)
    it is ``(0, inf)``.

    Examples
    --------
    >>> sign_interval([2.0] * 7 + [0.5], [1.0] * 8)
    (2.0, 2.0)
    >>> sign_interval([2.0] * 6 + [0.5] * 2, [1.0] * 8)
    (0.5, 2.0)
    >>> sign_interval([2.0] * 4, [1.0] * 4)
    (0.0, inf)
    """
    from math import comb  # scipy.stats costs ~0.6 s to import, and verify runs at job start

    r = np.sort(np.asarray(a, dtype=np.float64) / np.asarray(b, dtype=np.float64))
    n = r.size
    tail = (1.0 - level) / 2.0
    k = 0
    below = comb(n, 0)  # 2**n * P(count <= k), exactly
    while k < n // 2 and below <= tail * 2**n:
        k += 1
        below += comb(n, k)
    if k == 0:
        return 0.0, float("inf")
    return float(r[k - 1]), float(r[n - k])


def ratio_interval(
    a: ArrayLike,
    b: ArrayLike,
    *,
    level: float = LEVEL,
    boots: int = BOOTSTRAP,
    rng: int = 0,
) -> tuple[float, float, float]:
    """Speedup ``median(a) / median(b)`` and its interval.

    ``a[i]`` and ``b[i]`` were timed one after the other (a pair); pairs are
    resampled together, so what both orders share in a moment (another
    tenant's burst) cancels. The interval is the wider of the paired
    bootstrap interval and :func:`sign_interval` (see the module docstring).

    Examples
    --------
    >>> ratio_interval([2.0, 2.1, 1.9, 2.0], [1.0, 1.05, 0.95, 1.0])[0]
    2.0
    """
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1 or a.size == 0:
        raise RankoptInputError(
            f"`a` and `b` must be paired 1-d timings; got shapes {a.shape} and {b.shape}."
        )
    r = float(np.median(a) / np.median(b))
    if a.size < 2:
        return r, 0.0, float("inf")
    gen = np.random.default_rng(rng)
    idx = gen.integers(0, a.size, size=(boots, a.size))
    ra = np.median(a[idx], axis=1) / np.median(b[idx], axis=1)
    tail = (1.0 - level) / 2.0
    lo, hi = np.quantile(ra, [tail, 1.0 - tail])
    slo, shi = sign_interval(a, b, level=level)
    return r, min(float(lo), slo), max(float(hi), shi)


def _total_interval(
    pairs: Sequence[tuple[Sequence[float], Sequence[float]]],
    weights: Sequence[float],
    *,
    level: float = LEVEL,
    boots: int = BOOTSTRAP,
    rng: int = 0,
) -> tuple[float, float, float]:
    """Speedup of the weighted total of medians over sizes and its interval.

    The wider of a bootstrap per size and the bound that puts every size's
    candidate time at the edge of its :func:`sign_interval` at once.
    """
    gen = np.random.default_rng(rng)
    tot_a = np.zeros(boots)
    tot_b = np.zeros(boots)
    ma = mb = 0.0
    worst_b = best_b = 0.0  # the candidate's total at its sign intervals' edges
    for (a_, b_), w in zip(pairs, weights, strict=True):
        a = np.asarray(a_, dtype=np.float64)
        b = np.asarray(b_, dtype=np.float64)
        med_a = float(np.median(a))
        ma += w * med_a
        mb += w * float(np.median(b))
        idx = gen.integers(0, a.size, size=(boots, a.size))
        tot_a += w * np.median(a[idx], axis=1)
        tot_b += w * np.median(b[idx], axis=1)
        slo, shi = sign_interval(a, b, level=level)
        if w > 0:
            worst_b += w * med_a / slo if slo > 0 else float("inf")
            best_b += w * med_a / shi
    tail = (1.0 - level) / 2.0
    lo, hi = np.quantile(tot_a / tot_b, [tail, 1.0 - tail])
    slo = ma / worst_b if worst_b > 0 else float("inf")
    shi = ma / best_b if best_b > 0 else float("inf")
    return ma / mb, min(float(lo), slo), max(float(hi), shi)


def replicates(
    pairs: Sequence[tuple[Sequence[float], Sequence[float]]],
    weights: Sequence[float],
    direction: str,
    *,
    min_gain: float = MIN_GAIN,
) -> bool:
    """Whether each half of the run alone shows the gain (or loss) of the whole.

    ``direction`` is :data:`APPLY` or :data:`WORSE`; the halves split every
    size's pairs in time order. Sizes with fewer than 4 pairs are not split.
    """
    halves = []
    for part in (0, 1):
        ta = tb = 0.0
        for (a_, b_), w in zip(pairs, weights, strict=True):
            a = np.asarray(a_, dtype=np.float64)
            b = np.asarray(b_, dtype=np.float64)
            if a.size >= 4:
                cut = a.size // 2
                a, b = (a[:cut], b[:cut]) if part == 0 else (a[cut:], b[cut:])
            ta += w * float(np.median(a))
            tb += w * float(np.median(b))
        halves.append(ta / tb if tb > 0 else 1.0)
    if direction == APPLY:
        return all(h >= 1.0 + min_gain / 2 for h in halves)
    return all(h <= 1.0 - min_gain / 2 for h in halves)


def _replicated(
    pairs: Sequence[tuple[Sequence[float], Sequence[float]]],
    weights: Sequence[float],
    speedup: float,
    lo: float,
    hi: float,
    min_gain: float,
) -> str:
    v = verdict(speedup, lo, hi, min_gain=min_gain)
    if v != NO_GAIN and not replicates(pairs, weights, v, min_gain=min_gain):
        return NO_GAIN
    return v


def verdict(speedup: float, lo: float, hi: float, *, min_gain: float = MIN_GAIN) -> str:
    """:data:`APPLY`, :data:`WORSE` or :data:`NO_GAIN` (see the module docstring).

    Examples
    --------
    >>> verdict(1.5, 1.3, 1.7), verdict(1.01, 1.005, 1.02), verdict(0.8, 0.7, 0.9)
    ('apply', 'no measurable gain', 'worse')
    """
    if lo > 1.0 and speedup >= 1.0 + min_gain:
        return APPLY
    if hi < 1.0 and speedup <= 1.0 - min_gain:
        return WORSE
    return NO_GAIN


@dataclass(frozen=True)
class VerifyResult:
    """What ``rankopt verify`` measured.

    Attributes
    ----------
    rows : list of dict
        Per size: ``nbytes``, ``repeats``, ``launch_s`` and ``candidate_s``
        (medians), ``launch_algbw``, ``launch_busbw``, ``candidate_algbw``,
        ``candidate_busbw`` (bytes/s), ``speedup``, ``interval`` and
        ``verdict``; the raw ``launch_times`` and ``candidate_times``.
    speedup, interval, verdict :
        Overall: the weighted total time of one call per size.
    collective, n, order, engine :
        What was timed: the collective, the number of ranks, the candidate
        (``order[k]`` = launch rank of new rank ``k``), the engine.
    extra : dict
        Where the candidate came from (file, solved: the modelled speedup).
    """

    rows: list[dict[str, Any]]
    speedup: float
    interval: tuple[float, float]
    verdict: str
    collective: str
    n: int
    order: list[int]
    engine: str
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def applies(self) -> bool:
        """Whether the candidate measurably wins."""
        return self.verdict == APPLY

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (what ``--json`` writes)."""
        return {
            "format": "rankopt.verify/1",
            "collective": self.collective,
            "engine": self.engine,
            "n": self.n,
            "order": list(self.order),
            "speedup": self.speedup,
            "interval": list(self.interval),
            "level": LEVEL,
            "verdict": self.verdict,
            "rows": self.rows,
            **self.extra,
        }

    def to_json(self) -> str:
        """:meth:`to_dict` as one JSON document."""
        return json.dumps(self.to_dict(), indent=1) + "\n"

    def table(self) -> str:
        """nccl-tests-style table: size, time, algbw, busbw per order, speedup."""
        head = (
            f"{'size':>10} {'count':>5}  {'launch us':>11} {'algbw':>7} {'busbw':>7}  "
            f"{'rankopt us':>11} {'algbw':>7} {'busbw':>7}  {'speedup':>8} "
            f"{'90% interval':>15}  verdict"
        )
        if not self.rows:
            return (
                f"# rankopt verify: {self.collective}, {self.n} ranks, {self.engine}: the "
                "candidate is the launch order (the solve kept it), so there is nothing to "
                f"time: {self.verdict}"
            )
        lines = [
            f"# rankopt verify: {self.collective}, {self.n} ranks, {self.engine}; "
            "algbw/busbw in GB/s (nccl-tests), times are medians",
            head,
        ]
        for r in self.rows:
            lines.append(
                f"{format_size(r['nbytes']):>10} {r['repeats']:>5}  {r['launch_s'] * 1e6:>11.1f} "
                f"{r['launch_algbw'] / 1e9:>7.3f} {r['launch_busbw'] / 1e9:>7.3f}  "
                f"{r['candidate_s'] * 1e6:>11.1f} {r['candidate_algbw'] / 1e9:>7.3f} "
                f"{r['candidate_busbw'] / 1e9:>7.3f}  {r['speedup']:>7.3f}x "
                f"{r['interval'][0]:>7.3f}-{r['interval'][1]:<7.3f}  {r['verdict']}"
            )
        lo, hi = self.interval
        lines.append(
            f"# overall (one call of each size): speedup {self.speedup:.3f}x "
            f"(90% interval {lo:.3f}-{hi:.3f}x): {self.verdict}"
        )
        return "\n".join(lines)


def launch_order_result(
    collective: str, n: int, engine: str, extra: Mapping[str, Any] | None = None
) -> VerifyResult:
    """The result when the candidate is the launch order itself: nothing is timed.

    Examples
    --------
    >>> r = launch_order_result("allreduce", 4, "mpi")
    >>> r.verdict, r.applies, r.rows
    ('no measurable gain', False, [])
    """
    return VerifyResult(
        rows=[],
        speedup=1.0,
        interval=(1.0, 1.0),
        verdict=NO_GAIN,
        collective=collective,
        n=n,
        order=list(range(n)),
        engine=engine,
        extra={**dict(extra or {}), "note": "the candidate is the launch order"},
    )


def summarize(
    sizes: Sequence[int],
    pairs: Sequence[tuple[Sequence[float], Sequence[float]]],
    *,
    collective: str,
    n: int,
    order: ArrayLike,
    engine: str,
    weights: Sequence[float] | None = None,
    min_gain: float = MIN_GAIN,
    extra: Mapping[str, Any] | None = None,
    rng: int = 0,
) -> VerifyResult:
    """Turn :func:`measure_orders`' timings into a :class:`VerifyResult`."""
    factor = bus_factor(collective, n)
    rows = []
    for nbytes, (a, b) in zip(sizes, pairs, strict=True):
        r, lo, hi = ratio_interval(a, b, rng=rng)
        ta, tb = float(np.median(a)), float(np.median(b))
        rows.append(
            {
                "nbytes": int(nbytes),
                "repeats": len(a),
                "launch_s": ta,
                "candidate_s": tb,
                "launch_algbw": nbytes / ta,
                "launch_busbw": nbytes / ta * factor,
                "candidate_algbw": nbytes / tb,
                "candidate_busbw": nbytes / tb * factor,
                "speedup": r,
                "interval": [lo, hi],
                "verdict": _replicated([(a, b)], [1.0], r, lo, hi, min_gain),
                "launch_times": [float(x) for x in a],
                "candidate_times": [float(x) for x in b],
            }
        )
    w = [1.0] * len(rows) if weights is None else [float(x) for x in weights]
    s, lo, hi = _total_interval(pairs, w, rng=rng)
    order_arr: NDArray[np.int64] = np.asarray(order, dtype=np.int64)
    return VerifyResult(
        rows=rows,
        speedup=s,
        interval=(lo, hi),
        verdict=_replicated(pairs, w, s, lo, hi, min_gain),
        collective=collective,
        n=int(n),
        order=[int(x) for x in order_arr],
        engine=engine,
        extra=dict(extra or {}),
    )


def synthetic_timer(
    launch: Callable[[int], float],
    candidate: Callable[[int], float],
    *,
    noise: float = 0.05,
    rng: int = 0,
) -> Timer:
    """A timer of two modelled orders with log-normal noise (tests, demos).

    ``launch(nbytes)`` and ``candidate(nbytes)`` give the noiseless times.
    """
    gen = np.random.default_rng(rng)
    fns = (launch, candidate)

    def timer(which: int, nbytes: int) -> float:
        return float(fns[which](nbytes) * np.exp(noise * gen.standard_normal()))

    return timer
