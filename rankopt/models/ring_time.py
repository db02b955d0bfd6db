"""Ring algorithms under ``"time"`` / ``"contention"``: every step is alike.

A ring's steps all send ``nbytes / n`` from each rank to the next, so the
step time is a function of the ring's edge multiset (and, with uplinks, of
how many ring edges leave and enter each group).
"""

from __future__ import annotations

from rankopt.models.step import StepModel

__all__ = ["RingTime"]


class RingTime(StepModel):
    """α-β (``"time"``) or contention (``"contention"``) model of a ring schedule.

    Rotation invariant, and invariant under reversal for symmetric input.
    """

    rotation_invariant = True
