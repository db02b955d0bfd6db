"""Emulated cloud network: hosts, racks and pods built from Linux network namespaces.

Contents
--------
Topology, Testbed, TestbedError, teardown
    Describe, build and remove a hierarchical network (``topology``).
check, LevelCheck
    Measure each level's bandwidth and round trip (``check``).

Needs root and ``ip``/``tc`` (iproute2).  The experiment that times real
allreduce under rank orders lives in :mod:`rankopt.testbed.experiment`.
"""

from rankopt.testbed.check import LevelCheck, check
from rankopt.testbed.topology import (
    Testbed,
    TestbedError,
    Topology,
    existing_namespaces,
    parse_rate,
    parse_time,
    require_namespaces,
    teardown,
)

__all__ = [
    "LevelCheck",
    "Testbed",
    "TestbedError",
    "Topology",
    "check",
    "existing_namespaces",
    "parse_rate",
    "parse_time",
    "require_namespaces",
    "teardown",
]
