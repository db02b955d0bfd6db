"""Ring algorithms under ``"time"`` / ``"contention"``: every step is alike.

A ring's steps all send ``nbytes / n`` from each rank to the next, so the
step time is a function of the ring's edge multiset (and, with uplinks, of
how many ring edges leave and enter each group). With uplinks the swap
deltas come from :func:`rankopt.models.contention.make_step_contention`
with the steps merged into one: per (level, group, direction) crossing
counts and the largest edge latencies, ``O(levels log G)`` per swap.

The model is a :class:`~rankopt.models.step.StepModel`: it declares, for
every ring schedule, rotation invariance and ``ring_schedule`` in its
:class:`~rankopt.models.base.Capabilities` (invariant under reversal for
symmetric input too). ``RingTime`` is that class under the ring's name.

Examples
--------
>>> import numpy as np
>>> from rankopt.models.network import make_network
>>> from rankopt.models.schedule import schedule
>>> rack = np.array([0, 0, 1, 1])
>>> net = make_network(
...     np.full((4, 4), 1e-6), bandwidth=1e10, nbytes=4e6, groups=rack, uplink_bandwidth=1e9
... )
>>> m = RingTime(schedule("allreduce", "ring", 4), net, "contention")
>>> o = np.array([0, 2, 1, 3])  # 4 crossings per direction -> 2
>>> bool(np.isclose(m.swap_delta(o, 1, 2), m.cost([0, 1, 2, 3]) - m.cost(o)))
True
>>> m.rotation_invariant, m.capabilities.ring_schedule
(True, True)
"""

from __future__ import annotations

from rankopt.models.step import StepModel

__all__ = ["RingTime"]

#: The α-β / contention model of a ring schedule (the same class as StepModel).
RingTime = StepModel
