"""Eager trees: every send posted as soon as its data is there, links shared fairly.

Gloo's broadcast (``gloo/broadcast.cc``) has no steps. A process waits for
its one receive, then posts the sends to all of its children at once and
waits for none of them before the next; the root posts all of its sends at
time 0. The sends of one process share its link, and a child that is served
early forwards early. A step model, which gives every transfer of a step a
link of its own and starts the next step when the slowest one ends, gets
both wrong: on a network whose early sends cross several racks it runs them
one after the other at full rate instead of together at a fraction.

:class:`FlowTime` prices such a schedule as a fluid of concurrent flows:

* transfer ``e`` from new rank ``k`` can start once every transfer *into*
  ``k`` of an earlier step has ended (its data dependency) -- nothing else
  waits: no barrier between steps;
* a started transfer ``a -> b`` (``a = order[k]``) first waits
  ``latency[a, b]``, then moves its ``frac * nbytes`` bytes at a rate that
  changes only when a flow starts or ends;
* the rates are max-min fair (progressive filling) under the capacities a
  flow uses: its pair's ``bandwidth[a, b]``; the sending process's link,
  ``max_b bandwidth[a, b]``, shared by all the flows out of ``a`` (and the
  receiving one's, ``max_a bandwidth[a, b]``, by all the flows into ``b``);
  and, with ``objective="contention"``, at every level where ``a`` and
  ``b`` are in different groups, the uplink out of ``a``'s group and the
  one into ``b``'s, each shared by all the flows that cross it;
* the cost is the time the last transfer ends.

A process's link is its fastest pair rate: a pair that is slower than that
(a cross-rack pair limited by its rack's uplink) is limited elsewhere and
leaves the rest of the link to the other flows. Only the sender's data
holds a transfer back: unlike the barrier-free simulator of
``tests/test_des.py``, a transfer does not wait for its ranks' other
transfers of earlier steps, which is what Gloo's unawaited sends do.

:func:`flow_time` is the spec, written plainly; ``FlowEval`` in
``src_ext/_flow_eval.pyx`` is the compiled twin the model calls.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from rankopt._build_check import require_extension
from rankopt.models.base import Capabilities, CostModel
from rankopt.models.network import NetworkArrays
from rankopt.models.schedule import Schedule

_flow_eval = require_extension("rankopt.models._flow_eval")

__all__ = ["FlowTime", "flow_time"]

#: Relative tolerance under which flows that end together are ended together.
_TIE = 1e-12


def _dependencies(sched: Schedule) -> list[list[int]]:
    """For every transfer, the transfers into its sender from earlier steps."""
    step_of = np.repeat(np.arange(sched.n_distinct), np.diff(sched.step_ptr))
    into: dict[int, list[int]] = {}
    deps: list[list[int]] = []
    for e in range(sched.n_transfers):
        k = int(sched.src[e])
        deps.append([d for d in into.get(k, []) if step_of[d] < step_of[e]])
        into.setdefault(int(sched.dst[e]), []).append(e)
    return deps


def _link_rates(net: NetworkArrays) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Each process's outgoing and incoming link rate: its fastest pair's (inf without bandwidth)."""
    if net.bandwidth is None:
        return np.full(net.n, np.inf), np.full(net.n, np.inf)
    off = np.where(np.eye(net.n, dtype=bool), 0.0, net.bandwidth)
    return off.max(axis=1), off.max(axis=0)


def _rates(
    active: list[int],
    members: dict[tuple, list[int]],
    caps: dict[tuple, float],
) -> dict[int, float]:
    """Max-min fair rates of the ``active`` flows (progressive filling).

    ``members[c]`` lists the flows constraint ``c`` holds, ``caps[c]`` its
    capacity. All unfrozen flows grow together; when a constraint fills, its
    flows freeze at the level reached.
    """
    rate: dict[int, float] = {}
    left = dict(caps)
    live = set(active)
    while live:
        best, level = None, float("inf")
        for c, fl in members.items():
            k = sum(1 for f in fl if f in live)
            if k and left[c] / k < level:
                best, level = c, left[c] / k
        if best is None:  # nothing limits the rest: they move their bytes at once
            for f in live:
                rate[f] = float("inf")
            break
        frozen = [f for f in members[best] if f in live]
        for f in frozen:
            rate[f] = level
            live.discard(f)
            for c, fl in members.items():
                if f in fl:
                    left[c] = max(left[c] - level, 0.0)
    return rate


def flow_time(
    sched: Schedule, net: NetworkArrays, order: NDArray[np.int64], objective: str
) -> float:
    """Modelled seconds of ``sched`` as eager flows under ``order`` -- the spec (see the module)."""
    order = np.asarray(order, dtype=np.int64)
    if np.any(sched.repeat != 1):
        raise AssertionError("a flow model prices steps that run once")
    ne = sched.n_transfers
    if ne == 0:
        return 0.0
    a = [int(order[k]) for k in sched.src]
    b = [int(order[j]) for j in sched.dst]
    lat = [float(net.latency[a[e], b[e]]) for e in range(ne)]
    nbytes = float(net.nbytes) if net.has_rate else 0.0  # type: ignore[arg-type]
    left = [float(sched.frac[e]) * nbytes for e in range(ne)]
    members: dict[tuple, list[int]] = {}
    caps: dict[tuple, float] = {}
    bw = net.bandwidth
    links_out, links_in = _link_rates(net)
    for e in range(ne):
        keys: list[tuple[tuple, float]] = []
        if bw is not None:
            keys = [
                (("pair", e), float(bw[a[e], b[e]])),
                (("out", a[e]), float(links_out[a[e]])),
                (("in", b[e]), float(links_in[b[e]])),
            ]
        if objective == "contention":
            for lev in range(net.levels):
                ga, gb = int(net.labels[lev, a[e]]), int(net.labels[lev, b[e]])
                if ga != gb:
                    keys.append((("up", lev, ga), float(net.uplink[lev, ga])))
                    keys.append((("down", lev, gb), float(net.uplink_in[lev, gb])))
        for c, cap in keys:
            members.setdefault(c, []).append(e)
            caps[c] = cap
    deps = _dependencies(sched)
    waiting = [len(d) for d in deps]
    dependents: dict[int, list[int]] = {}
    for e, d in enumerate(deps):
        for x in d:
            dependents.setdefault(x, []).append(e)
    starts = {e: lat[e] for e in range(ne) if not deps[e]}  # flow -> time it starts moving
    moving: list[int] = []
    now, done, finish = 0.0, 0, 0.0
    while done < ne:
        rate = _rates(moving, members, caps) if moving else {}
        ends = {e: now + (left[e] / rate[e] if left[e] > 0 else 0.0) for e in moving}
        t_end = min(ends.values(), default=float("inf"))
        t_start = min(starts.values(), default=float("inf"))
        nxt = min(t_end, t_start)
        for e in moving:
            if rate[e] != float("inf"):
                left[e] -= rate[e] * (nxt - now)
        now = nxt
        ended = [e for e in moving if ends[e] <= now * (1 + _TIE)]
        for e in ended:
            moving.remove(e)
            left[e] = 0.0
            done += 1
            finish = max(finish, now)
            for x in dependents.get(e, []):
                waiting[x] -= 1
                if waiting[x] == 0:
                    starts[x] = now + lat[x]
        for e in [e for e, t in starts.items() if t <= now * (1 + _TIE)]:
            del starts[e]
            moving.append(e)
    return finish


class FlowTime(CostModel):
    """Time of a schedule run as eager flows with fairly shared links (see the module).

    Used for Gloo's broadcast (``"binomial_gloo"``). :meth:`cost` calls the
    compiled ``FlowEval``, one event-driven run per order (``O(events x
    flows x capacities per flow)``), and remembers the last few orders' costs,
    so a swap delta from a search's current order is one run.

    Examples
    --------
    >>> from rankopt.models.network import make_network
    >>> from rankopt.models.schedule import schedule
    >>> net = make_network(np.full((4, 4), 1e-6), bandwidth=1e9, nbytes=1e6)
    >>> m = FlowTime(schedule("broadcast", "binomial_gloo", 4), net, "time")
    >>> round(m.cost(np.arange(4)) * 1e6, 6)  # root sends to 1 and 2 together, then 1 to 3
    3002.0
    """

    def __init__(self, sched: Schedule, net: NetworkArrays, objective: str) -> None:
        if np.any(sched.repeat != 1):
            raise AssertionError("a flow model prices steps that run once")
        self.schedule = sched
        self.network = net
        self.n = sched.n
        self.objective = objective
        deps = _dependencies(sched)
        dep_count = np.array([len(d) for d in deps], dtype=np.int64)
        pairs = sorted((x, e) for e, d in enumerate(deps) for x in d)  # dependents, CSR
        dnt_ptr = np.zeros(sched.n_transfers + 1, dtype=np.int64)
        np.add.at(dnt_ptr, np.array([x + 1 for x, _ in pairs], dtype=np.int64), 1)
        dnt_ptr = np.cumsum(dnt_ptr).astype(np.int64)
        dnt_idx = np.array([e for _, e in pairs], dtype=np.int64)
        has_bw = net.bandwidth is not None
        links_out, links_in = _link_rates(net)
        self.evaluator = _flow_eval.FlowEval(
            net.latency,
            net.bandwidth if has_bw else np.zeros((1, 1)),
            has_bw,
            links_out,
            links_in,
            float(net.nbytes) if net.has_rate else 0.0,  # type: ignore[arg-type]
            objective == "contention",
            net.labels,
            net.uplink,
            net.uplink_in,
            sched.src,
            sched.dst,
            sched.frac,
            dep_count,
            dnt_ptr,
            dnt_idx,
        )
        self._memo: dict[bytes, float] = {}
        self.capabilities = Capabilities(
            latency=net.latency, bandwidth=net.bandwidth, nbytes=net.nbytes
        )

    def reference_cost(self, order: NDArray[np.int64]) -> float:
        return flow_time(self.schedule, self.network, np.asarray(order), self.objective)

    #: Orders whose cost is remembered (a search asks for its current order and
    #: its last proposal again and again: a swap delta then costs one run).
    _MEMO = 4

    def cost(self, order: NDArray[np.int64]) -> float:
        o = np.ascontiguousarray(order, dtype=np.int64)
        key = o.tobytes()
        hit = self._memo.get(key)
        if hit is not None:
            return hit
        c = float(self.evaluator.cost(o))
        if len(self._memo) >= self._MEMO:
            self._memo.pop(next(iter(self._memo)))
        self._memo[key] = c
        return c

    def swap_deltas(
        self, order: NDArray[np.int64], pairs: NDArray[np.int64]
    ) -> NDArray[np.float64]:
        """Cost changes of many swaps ``pairs[r] = (i, j)`` from ``order``."""
        o = np.ascontiguousarray(order, dtype=np.int64)
        base = self.cost(o)
        out = np.empty(len(pairs), dtype=np.float64)
        for r, (i, j) in enumerate(np.asarray(pairs)):
            new = o.copy()
            new[i], new[j] = new[j], new[i]
            out[r] = self.cost(new) - base
        return out
