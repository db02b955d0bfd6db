"""Measure the network the job runs on: latency and bandwidth between every pair of processes.

Contents
--------
rankopt.probe.mpi.measure
    Probe an MPI communicator (mpi4py).
rankopt.probe.torch.measure
    Probe a torch.distributed process group (Gloo).
Measurement, load_measurement
    The result and its ``.npz`` file format.
hierarchy
    The hierarchy (hosts, racks, pods) inferred from measured matrices, and
    every group's uplink capacity: the probe plans its bandwidth phase with
    it and the network object carries it.
round_robin, bandwidth_slots
    The schedules shared by the backends.
linear_latency, linear, plan, simulate
    The linear latency and bandwidth schedules (O(n) pairs, the rest filled
    from the groups), the dry-run plan of a probe, and the probe's planners
    run against a modelled network.
ProbeTimeoutError, ProbeProgress
    The error raised on every process when a peer does not answer, and the
    progress report passed to callbacks.

The backends are submodules so that importing :mod:`rankopt.probe` never
imports mpi4py or torch.
"""

from rankopt.probe._common import ProbeProgress, ProbeTimeoutError
from rankopt.probe.measurement import Measurement, load_measurement
from rankopt.probe.schedule import bandwidth_slots, round_robin

__all__ = [
    "Measurement",
    "load_measurement",
    "ProbeProgress",
    "ProbeTimeoutError",
    "round_robin",
    "bandwidth_slots",
]
