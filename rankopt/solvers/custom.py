"""Custom objectives: minimise a user's function of (latency, order).

``solve(latency, objective=f)`` wraps ``f`` in :class:`CustomModel`. When
``f`` is a Numba ``@njit`` function ``(latency, order) -> float``, annealing
runs entirely in Numba (:func:`anneal_custom`): swap and insert moves, each
scored by a full re-evaluation of ``f``. A plain Python callable also works,
through the generic (slower) annealing loop.

The Numba driver is compiled on first use for each user function (it takes
the function as an argument, which is the point); nothing is compiled at
import.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray

from rankopt._validation import RankoptInputError
from rankopt.models.base import CostModel

__all__ = ["CustomModel", "anneal_custom", "is_jitted"]


def is_jitted(f: Any) -> bool:
    """Whether ``f`` is a Numba dispatcher (``@numba.njit``)."""
    return type(f).__module__.startswith("numba") and hasattr(f, "py_func")


class CustomModel(CostModel):
    """A cost model defined by a user's function ``f(latency, order) -> float``.

    Parameters
    ----------
    latency : ndarray (n, n)
        Validated matrix, passed to ``f`` unchanged.
    f : callable
        ``f(latency, order)`` with ``order`` an int64 array; lower is better.
        It must return a finite real number: NaN or inf (no order can be
        compared with it) raises :class:`~rankopt.RankoptInputError` naming
        the order, wherever it is priced in Python (the start, every order of
        the generic loops, the result); the Numba annealing loop rejects such
        a move and checks its sampled moves.

    Examples
    --------
    >>> def ring(lat, order):
    ...     return float(sum(lat[order[k], order[(k + 1) % len(order)]] for k in range(len(order))))
    >>> m = CustomModel(np.array([[0.0, 1.0], [2.0, 0.0]]), ring)
    >>> m.cost(np.array([0, 1])), m.objective
    (3.0, 'ring')
    """

    def __init__(self, latency: NDArray[np.float64], f: Callable[..., float]) -> None:
        self.latency = np.ascontiguousarray(latency, dtype=np.float64)
        self.n = int(self.latency.shape[0])
        self.f = f
        self.jitted = is_jitted(f)
        self.objective = getattr(f, "__name__", "custom")

    def reference_cost(self, order: NDArray[np.int64]) -> float:
        order = np.ascontiguousarray(order, dtype=np.int64)
        value = self.f(self.latency, order)
        try:
            c = float(value)
        except (TypeError, ValueError):
            raise RankoptInputError(
                f"`objective` must return a real number; {self.objective}(latency, order) "
                f"returned {value!r} ({type(value).__name__}) for order {order.tolist()}."
            ) from None
        if not math.isfinite(c):
            raise RankoptInputError(
                f"`objective` must return a finite number; {self.objective}(latency, order) "
                f"returned {c} for order {order.tolist()}."
            )
        return c


_KERNEL: Any = None


def _kernel() -> Any:
    """Build the Numba annealing driver on first use."""
    global _KERNEL
    if _KERNEL is not None:
        return _KERNEL
    import numba

    @numba.njit(nogil=True)
    def _rand(state: Any) -> Any:  # splitmix64 -> float in [0, 1)
        state[0] += np.uint64(0x9E3779B97F4A7C15)
        z = state[0]
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
        return (z >> np.uint64(11)) * (1.0 / 9007199254740992.0)

    @numba.njit(nogil=True)
    def _sample(f: Any, lat: Any, order: Any, lo: int, count: int, seed: int) -> Any:
        state = np.array([seed], dtype=np.uint64)
        n = order.shape[0]
        cur = f(lat, order)
        out = np.empty(count)
        for t in range(count):
            i = lo + int(_rand(state) * (n - lo))
            j = lo + int(_rand(state) * (n - lo))
            if i == j:
                j = lo + (j - lo + 1) % (n - lo)
            order[i], order[j] = order[j], order[i]
            out[t] = f(lat, order) - cur
            order[i], order[j] = order[j], order[i]
        return out

    @numba.njit(nogil=True)
    def _run(
        f: Any,
        lat: Any,
        order: Any,
        lo: int,
        iters: int,
        temp: float,
        factor: float,
        state: Any,
        cur: float,
        best: Any,
        best_cost: float,
    ) -> Any:
        # resumable: the generator state, temperature and current cost come in
        # and go out, so slicing a run changes nothing but where it may stop
        n = order.shape[0]
        m = n - lo
        tmp = order.copy()
        accepted = 0
        for _ in range(iters):
            i = lo + int(_rand(state) * m)
            j = lo + int(_rand(state) * m)
            insert = _rand(state) < 0.2
            u = _rand(state)
            temp *= factor
            if i == j:
                continue
            if insert:
                tmp[:] = order
                v = tmp[i]
                if i < j:
                    tmp[i:j] = order[i + 1 : j + 1]
                else:
                    tmp[j + 1 : i + 1] = order[j:i]
                tmp[j] = v
                c = f(lat, tmp)
            else:
                order[i], order[j] = order[j], order[i]
                c = f(lat, order)
                order[i], order[j] = order[j], order[i]
            d = c - cur
            if d <= 0.0 or (temp > 0.0 and u < math.exp(-d / temp)):
                if insert:
                    order[:] = tmp
                else:
                    order[i], order[j] = order[j], order[i]
                cur = c
                accepted += 1
                if cur < best_cost:
                    best_cost = cur
                    best[:] = order
        return cur, temp, best_cost, accepted

    _KERNEL = (_sample, _run)
    return _KERNEL


#: Seconds of work per slice of the Numba loop (the time-limit granularity).
SLICE_S = 2e-3


def anneal_custom(
    model: CustomModel,
    ctx: Any,
    gen: np.random.Generator,
    start: NDArray[np.int64],
    budget: Any,
    iters: int,
) -> NDArray[np.int64]:
    """Anneal a Numba objective with swap and insert moves (used by ``anneal``).

    One geometric schedule from ``t0`` to ``t1`` over ``iters`` proposals, run
    in slices of about ``SLICE_S`` seconds (their length adapts to the
    measured speed) so that ``time_limit`` is read often; the slicing does
    not change the moves.
    """
    from rankopt.solvers.anneal import temperatures

    sample, run = _kernel()
    lo = 1 if ctx.keep_rank0 and not model.rotation_invariant else 0
    order = np.ascontiguousarray(start, dtype=np.int64).copy()
    if model.n - lo < 2:
        return order
    count = int(min(200, max(iters // 10, 10)))
    deltas = np.asarray(
        sample(model.f, model.latency, order, lo, count, int(gen.integers(1, 2**63 - 1)))
    )
    if not np.isfinite(deltas).all():
        model.cost(order)  # names the start when it is the non-finite one
        raise RankoptInputError(
            f"`objective` must return a finite number; {model.objective}(latency, order) "
            f"returned nan or inf for an order one swap away from {order.tolist()}."
        )
    t0, t1 = temperatures(deltas)
    factor = (t1 / t0) ** (1.0 / iters) if t0 > 0.0 and iters > 0 else 0.0
    state = np.array([gen.integers(1, 2**63 - 1)], dtype=np.uint64)
    cur = float(model.cost(order))
    best = order.copy()
    best_cost = cur
    temp = t0
    every = max(iters // 20, 1)
    size = 1
    done = 0
    next_report = every
    while done < iters:
        step = min(size, iters - done)
        tic = time.perf_counter()
        cur, temp, best_cost, _ = run(
            model.f, model.latency, order, lo, step, temp, factor, state, cur, best, best_cost
        )
        took = time.perf_counter() - tic
        done += step
        if took < 0.5 * SLICE_S:
            size *= 2
        elif took > 2 * SLICE_S and size > 1:
            size //= 2
        if done >= next_report or done == iters:
            ctx.record(best_cost, budget.iterations + done)
            next_report = done + every
        if ctx.out_of_time():
            budget.stop = "time_limit"
            break
    budget.spend(count + done, done)
    return best
