"""The network stage: what the measurements say about the network, as one object.

Contents
--------
core
    :class:`Network` (latency and bandwidth with their spreads, hosts,
    hierarchy, uplinks, units and provenance), :func:`as_network`,
    :func:`load_network`, the network file format and record, and the
    networks redrawn within the measured spread (:class:`Redraw`).
hierarchical
    :class:`~rankopt.network.hierarchical.HierarchicalNetwork`, the
    host-level form of a very large job, its ring cost and ring solve.
io
    Latency and bandwidth matrices from text, CSV, JSON and NumPy files.
cloud
    Synthetic clouds (pods, racks, hosts) and the bundled example.
tsplib
    TSPLIB instances as distance matrices (the test suite's references).

The hierarchy a network carries is inferred by :mod:`rankopt.probe.hierarchy`
(from the measured matrices, so the probe can plan with it too).

Everything :mod:`rankopt.network.core` exports is importable from here. The
size limit ``INFER_MAX_N`` is read where it is defined: change it on
:mod:`rankopt.network.core`.
"""

from __future__ import annotations

from rankopt.network import core as _core
from rankopt.network.core import *  # noqa: F403 -- the stage's public names are core's

__all__ = list(_core.__all__)
