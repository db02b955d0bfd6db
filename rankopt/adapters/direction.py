"""Which way round a ring runs beside another tenant's load: timed, not guessed.

Beside another tenant's load a ring and the same ring with its group blocks the
other way round can differ by up to 2x where the model prices them alike, and
which of the two wins depends on what the load is (TCP flows yield to rings
that meet them on two uplinks; paced UDP flows and TCP flows that come and go
do not, and a ring that crosses two loaded queues instead of one loses), which
the probe cannot read reliably. The solve records the other arrangement
(``SolveResult.extra["ring_alternative"]``,
:func:`rankopt.solvers.solve._ring_alternative`); before the program starts,
the user path times both orders with the engine's own collective, in visits
as ``rankopt verify`` does (:func:`~rankopt.adapters.verify_stats.measure_orders`:
per order :data:`TRIAL_VISITS` visits of one untimed call and
:data:`TRIAL_BLOCK` timed calls, at :data:`TRIAL_BYTES` or the solve's message
size if smaller; up to :data:`TRIAL_VISITS_SPLIT` visits where the rounds
disagree, as beside a neighbour whose load comes and goes), and applies the other
way round only when its calls were faster by more than :data:`TRIAL_MARGIN`
(median of the paired ratios). Where that first pass is a near tie (the other way
round neither faster by the margin nor slower by more than :data:`TRIAL_TIE`), or
would turn the ring, and the job's own message is larger, a second pass at the
job's size (at most :data:`TRIAL_BYTES_JOB`; one round where both pairs differ by
more than :data:`TRIAL_JOB_DECISIVE`) decides: beside
paced UDP load the two ways timed 0.99 and 0.972 apart at 4 MiB while at the
job's 16 MiB the other way round was 8% and 12% faster. Where the probe saw the
load come and go (``trial["varying"]``), visits fall in step with a neighbour that
is on and off for a few seconds each, so the trial is instead one pass at the job's
size of :data:`TRIAL_PAIRS_VARYING` single calls of each order, in a random order,
decided by the two orders' total times (:func:`decide_total`). The report says what
was timed and what was applied.

Measured on the emulated racks (Open MPI ring allreduce, 16 MiB, the rings of
the tie; ``bench/testbed_direction.py``): 3 paced TCP flows one way, 4.87 s
with their way against 2.25 s against it; 2 unpaced TCP flows 3.87 against
2.41 s; 2 paced UDP flows 2.13 against 2.37 s (:mod:`rankopt.solvers.solve`).

The engines' adapters run the trial (:func:`rankopt.adapters.mpi.optimize`,
``python -m rankopt.mpi``; ``rankopt run`` on Gloo; ``rankopt run-mpi --network``
in a job of its own, :mod:`rankopt.cli._direction_job`) with their timers
(:class:`~rankopt.adapters.mpi.MPITimer`, :class:`~rankopt.adapters.verify.GlooTimer`)
through :func:`measure`; :func:`plan` and :func:`decide` are shared.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "TRIAL_BYTES",
    "TRIAL_BLOCK",
    "TRIAL_VISITS",
    "TRIAL_VISITS_SPLIT",
    "TRIAL_MARGIN",
    "TRIAL_DECISIVE",
    "TRIAL_TIE",
    "TRIAL_BYTES_JOB",
    "TRIAL_JOB_DECISIVE",
    "TRIAL_PAIRS_VARYING",
    "TRIAL_VARYING_BUDGET_S",
    "decide_total",
    "plan",
    "decide",
    "applied",
    "noted",
    "measure",
    "decisive",
    "near_tie",
    "split",
]

#: Largest message of a timed call of the trial (bytes); the solve's size when smaller.
TRIAL_BYTES = 4 << 20
#: Timed calls of one order per visit (back to back, after one untimed call).
TRIAL_BLOCK = 2
#: Visits of each order (which order goes first alternates) ...
TRIAL_VISITS = 2
#: ... and at most this many where the rounds disagree (one round's paired ratios put
#: the other way round ahead by more than ``TRIAL_MARGIN``, another behind by more):
#: the load comes and goes, and a round meets it or not.
TRIAL_VISITS_SPLIT = 6
#: The other way round is applied only when its calls were faster by more than this
#: fraction (the median of the paired ratios of the two orders' timed calls).
TRIAL_MARGIN = 0.03
#: Once both orders have gone first, paired ratios that all lie this far from 1, on
#: one side, end the first pass.
TRIAL_DECISIVE = 0.25
#: A first pass whose median paired ratio is at least ``1 - TRIAL_MARGIN`` and below
#: ``1 + TRIAL_TIE`` is a near tie: timed again at the job's own message size.
TRIAL_TIE = 0.05
#: Largest message of that second pass (bytes); the job's size when smaller.
TRIAL_BYTES_JOB = 32 << 20
#: The second pass stops after a round whose paired ratios all lie this far from 1
#: on one side (its calls take seconds each; a near tie at 4 MiB that is 12% apart at
#: the job's size needs no second round to tell).
TRIAL_JOB_DECISIVE = 0.08
#: Where the probe saw load come and go, the trial is one pass at the job's size of
#: this many calls of each order, one of each in turn, which goes first drawn at
#: random (the same on every rank), decided by the two orders' total times.
TRIAL_PAIRS_VARYING = 12
#: Seed of that draw: a fixed sequence, so that a trial is repeatable.
TRIAL_SEQUENCE_SEED = 0x7A1
#: That pass ends early once its timed calls took this many seconds in all, after at
#: least half its pairs (calls of the job's size beside a neighbour that stalls them).
TRIAL_VARYING_BUDGET_S = 60.0
#: Collectives whose trial the engines' timers can run.
TRIAL_COLLECTIVES = ("allreduce", "allgather")


def plan(result: Any) -> dict[str, Any] | None:
    """What the trial of ``result`` times: ``{"alternative", "collective", "nbytes",
    "job_nbytes", "cost", "varying"}`` (``nbytes`` the first pass's message,
    ``job_nbytes`` a near tie's second pass's, the same when the job's message is no
    larger than :data:`TRIAL_BYTES`; ``varying`` whether the probe saw the load come
    and go), or ``None`` when the solve recorded no other way round (or
    the collective is one the trial cannot time)."""
    if result is None:
        return None
    alt = result.extra.get("ring_alternative")
    if not alt or result.collective not in TRIAL_COLLECTIVES:
        return None
    floor = 4 * len(alt["order"])
    size = TRIAL_BYTES if result.nbytes is None else min(TRIAL_BYTES, int(result.nbytes))
    job = size if result.nbytes is None else min(TRIAL_BYTES_JOB, int(result.nbytes))
    return {
        "alternative": [int(x) for x in alt["order"]],
        "collective": str(result.collective),
        "nbytes": max(int(size), floor),
        "job_nbytes": max(int(job), int(size), floor),
        "cost": float(alt["cost"]),
        "varying": bool(alt.get("varying", False)),
    }


def decide(
    times_order: Sequence[float], times_other: Sequence[float], nbytes: int
) -> tuple[bool, str]:
    """Whether the other way round wins, and the report's line.

    The other way round wins when the median of the paired ratios (its call over
    the order's) is below ``1 - TRIAL_MARGIN``.

    >>> decide([2.0, 2.1, 2.0, 2.2], [1.0, 1.1, 1.0, 1.2], 4 << 20)[0]
    True
    >>> decide([1.0, 1.0], [0.99, 0.985], 4 << 20)[0]
    False
    """
    ratios = _ratios(times_order, times_other)
    ratio = _median_ratio(times_order, times_other)
    wins = ratio < 1.0 - TRIAL_MARGIN
    a = statistics.median(times_order)
    b = statistics.median(times_other)
    what = "the other way round applied" if wins else "the order found kept"
    line = (
        f"ring direction timed beside the load ({len(ratios)} calls each of {nbytes / 2**20:.3g} "
        f"MiB): the order found {a:.3g} s, its groups the other way round {b:.3g} s "
        f"(ratio {ratio:.3f}); {what}"
    )
    return wins, line


def _ratios(times_order: Sequence[float], times_other: Sequence[float]) -> list[float]:
    return [b / a for a, b in zip(times_order, times_other, strict=True) if a > 0]


def _median_ratio(times_order: Sequence[float], times_other: Sequence[float]) -> float:
    ratios = _ratios(times_order, times_other)
    return float(statistics.median(ratios)) if ratios else 1.0


def near_tie(times_order: Sequence[float], times_other: Sequence[float]) -> bool:
    """Whether a pass's median paired ratio lies in ``[1 - TRIAL_MARGIN, 1 + TRIAL_TIE)``:
    neither way round clearly the faster.

    >>> near_tie([1.0, 1.0], [0.99, 0.98]), near_tie([1.0, 1.0], [1.3, 1.4])
    (True, False)
    """
    ratio = _median_ratio(times_order, times_other)
    return 1.0 - TRIAL_MARGIN <= ratio < 1.0 + TRIAL_TIE


def applied(result: Any, order: NDArray[np.int64], cost: float, line: str) -> Any:
    """``result`` with ``order`` (the other way round, modelled ``cost``) applied and
    ``line`` added to its notes."""
    from rankopt.order import invert

    order = np.asarray(order, dtype=np.int64)
    speedup = result.baseline_cost / cost if cost > 0 else result.speedup
    extra = {**result.extra, "direction_trial": line}
    return dataclasses.replace(
        result,
        order=order,
        rank_of=invert(order),
        cost=float(cost),
        speedup=float(speedup),
        notes=(*result.notes, line),
        extra=extra,
    )


def noted(result: Any, line: str) -> Any:
    """``result`` with ``line`` added to its notes (the order found kept)."""
    return dataclasses.replace(
        result, notes=(*result.notes, line), extra={**result.extra, "direction_trial": line}
    )


def measure(timer: Any, trial: dict[str, Any]) -> tuple[bool, str]:
    """Time the order (``timer(0, ...)``) and the other way round (``timer(1, ...)``)
    in :data:`TRIAL_VISITS` rounds of one visit each (the first round the order
    first, the next the other way round first, and so on); ``(the other way round
    wins, line)``, the same on every rank (the timers return the slowest rank's
    times). Where the rounds disagree (:func:`split`) the pass goes on, up to
    :data:`TRIAL_VISITS_SPLIT` rounds: beside a neighbour on for 2 s and off for
    2 s, one round of 4 MiB calls timed the order found in the neighbour's on phase
    and the other way round in its off phase (0.392 against 0.233 s), and the
    turned ring ran 10% slower over the job. A first pass stops after its two
    rounds; a second pass (below) may stop after one round whose paired ratios all
    lie beyond :data:`TRIAL_JOB_DECISIVE` of 1 on one side (its calls take seconds
    each, a few of the neighbour's phases). A first pass that is a near tie
    (:func:`near_tie`), or that would turn the ring, is followed by a second at
    ``trial["job_nbytes"]`` where that is larger, which decides alone: beside the
    same neighbour on 2,4,3 both rounds at 4 MiB put the other way round 40% ahead
    (ratio 0.593), and at the job's 16 MiB it ran 6% slower in total.

    Where ``trial["varying"]`` (the probe saw the load come and go) none of that
    runs: one pass at ``trial["job_nbytes"]`` of single calls in a random order
    (:func:`_random_pairs`), decided by total time (:func:`decide_total`)."""
    nbytes = int(trial["nbytes"])
    job = int(trial.get("job_nbytes", nbytes))
    if trial.get("varying"):
        size = max(job, nbytes)
        mine, other = _random_pairs(timer, size, TRIAL_PAIRS_VARYING)
        return decide_total(mine, other, size)
    mine, other = _timed_pass(timer, nbytes, min_rounds=TRIAL_VISITS)
    wins, line = decide(mine, other, nbytes)
    tie = near_tie(mine, other)
    if job <= nbytes or not (wins or tie):
        return wins, line
    first = _median_ratio(mine, other)
    mine, other = _timed_pass(timer, job, TRIAL_JOB_DECISIVE)
    wins, line = decide(mine, other, job)
    why = "a near tie" if tie else "the other way round faster there"
    return wins, f"{line} (at {nbytes / 2**20:.3g} MiB first: ratio {first:.3f}, {why})"


def _timed_pass(
    timer: Any, nbytes: int, settled: float = TRIAL_DECISIVE, min_rounds: int = 1
) -> tuple[list[float], list[float]]:
    """One pass of the trial at ``nbytes``: both orders' timed calls, in pairs. After
    ``min_rounds`` rounds it stops once the ratios all lie beyond ``settled`` of 1 on
    one side; after :data:`TRIAL_VISITS` rounds unless they are :func:`split`; and
    after :data:`TRIAL_VISITS_SPLIT` rounds in any case."""
    from rankopt.adapters.verify_stats import measure_orders

    mine: list[float] = []
    other: list[float] = []
    rounds: list[float] = []
    for visit in range(TRIAL_VISITS_SPLIT):
        swap = visit % 2 == 1
        ((a, b),) = measure_orders(
            _swapped(timer) if swap else timer,
            [nbytes],
            repeats=TRIAL_BLOCK,
            warmup=0,
            block=TRIAL_BLOCK,
            settle=1,
        )
        if swap:
            a, b = b, a
        mine += a
        other += b
        rounds.append(_median_ratio(a, b))
        if visit + 1 >= min_rounds and decisive(_ratios(mine, other), settled):
            break
        if visit + 1 >= TRIAL_VISITS and not split(rounds):
            break
    return mine, other


def _random_pairs(timer: Any, nbytes: int, pairs: int) -> tuple[list[float], list[float]]:
    """``pairs`` calls of each order at ``nbytes``, one of each in turn; which goes
    first in a pair is drawn at random from :data:`TRIAL_SEQUENCE_SEED`. After half
    the pairs the pass ends once its calls took :data:`TRIAL_VARYING_BUDGET_S` in all.

    Why not visits: beside a neighbour that is on for 2 s and off for 2 s, visits of
    a few calls that alternate A B, B A, ... form a pattern of the same period as
    the neighbour's, and every visit of one order can fall in its on phase and every
    visit of the other in its off phase (at 4 MiB the order found read 0.38-0.39 s
    against 0.22-0.24 s on three launches, where the two ways timed call by call
    were level). Simulated against such a neighbour (periods of 1 to 16 s, any
    phase), the visits picked a ring 14% faster at 16 MiB on 37-81% of trials where
    the order found was the slower; twelve single calls of each, in a random order,
    and their total times on 88-100%.
    """
    gen = np.random.default_rng(TRIAL_SEQUENCE_SEED)
    mine: list[float] = []
    other: list[float] = []
    for first in gen.integers(0, 2, size=pairs).tolist():
        t = {which: float(timer(which, nbytes)) for which in (first, 1 - first)}
        mine.append(t[0])
        other.append(t[1])
        # the timers return the slowest rank's times: every rank stops alike
        if 2 * len(mine) >= pairs and sum(mine) + sum(other) >= TRIAL_VARYING_BUDGET_S:
            break
    return mine, other


def decide_total(
    times_order: Sequence[float], times_other: Sequence[float], nbytes: int
) -> tuple[bool, str]:
    """Whether the other way round wins by total time, and the report's line: it wins
    when its calls took less than ``1 - TRIAL_MARGIN`` of the order's in total.

    >>> decide_total([1.0, 1.3, 1.0], [1.3, 0.9, 0.9], 16 << 20)[0]
    True
    >>> decide_total([1.0, 1.3], [1.3, 1.0], 16 << 20)[0]
    False
    """
    a, b = float(sum(times_order)), float(sum(times_other))
    ratio = b / a if a > 0 else 1.0
    wins = ratio < 1.0 - TRIAL_MARGIN
    what = "the other way round applied" if wins else "the order found kept"
    line = (
        f"ring direction timed beside load that came and went ({len(times_order)} calls "
        f"each of {nbytes / 2**20:.3g} MiB, one of each in turn, in a random order): the "
        f"order found {a:.3g} s in total, its groups the other way round {b:.3g} s "
        f"(ratio {ratio:.3f}); {what}"
    )
    return wins, line


def split(rounds: Sequence[float], margin: float = TRIAL_MARGIN) -> bool:
    """Whether the rounds' median paired ratios disagree: one puts the other way round
    ahead by more than ``margin``, another behind by more.

    >>> split([0.6, 1.6]), split([0.6, 0.9]), split([1.01, 0.99])
    (True, False, False)
    """
    return bool(rounds) and min(rounds) < 1.0 - margin and max(rounds) > 1.0 + margin


def _swapped(timer: Any) -> Any:
    """``timer`` with its two orders swapped (the other way round first in a round)."""

    def timed(which: int, nbytes: int) -> float:
        return float(timer(1 - which, nbytes))

    return timed


def decisive(ratios: Sequence[float], settled: float = TRIAL_DECISIVE) -> bool:
    """Whether every ratio lies beyond ``settled`` (:data:`TRIAL_DECISIVE`) of 1, all on
    one side.

    >>> decisive([1.6, 1.8]), decisive([0.7, 0.72]), decisive([1.6, 0.9])
    (True, True, False)
    >>> decisive([0.88, 0.86], TRIAL_JOB_DECISIVE)
    True
    """
    return bool(ratios) and (
        all(r > 1.0 + settled for r in ratios) or all(r < 1.0 - settled for r in ratios)
    )
