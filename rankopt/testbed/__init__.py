"""Emulated cloud network: hosts, racks and pods built from Linux network namespaces.

Contents
--------
Topology, TestbedError
    Describe a hierarchical network (``topology``).
Testbed, teardown
    Build and remove it in network namespaces (``netns``).
check, LevelCheck
    Measure each level's bandwidth and round trip (``check``).

Needs root and ``ip``/``tc`` (iproute2).  The experiment that times real
allreduce under rank orders lives in :mod:`rankopt.testbed.experiment`.
"""

from rankopt.testbed.check import LevelCheck, check
from rankopt.testbed.netns import Testbed, existing_namespaces, require_namespaces, teardown
from rankopt.testbed.topology import TestbedError, Topology, parse_rate, parse_time

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
