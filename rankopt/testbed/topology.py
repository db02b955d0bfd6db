"""Description of a hierarchical network: hosts in racks, racks in pods.

Contents
--------
Topology
    Hosts per rack (equal, or one size per rack), racks per pod, pods, the rate
    of every level's link and an optional extra one-way latency per level;
    configured matrices and groups.
parse_rate, parse_time
    ``"200mbit"`` -> bytes/s, ``"5ms"`` -> seconds.
TestbedError
    The testbed cannot be built or used on this machine.

:mod:`rankopt.testbed.netns` builds a Topology from network namespaces.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import numpy as np

from rankopt import units
from rankopt.errors import TestbedError

__all__ = ["Topology", "TestbedError", "parse_rate", "parse_time"]

_SUBNET = "10.213"


_TIME_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}


def parse_rate(value: str | float) -> float:
    """Convert a rate to bytes/s, as :func:`rankopt.units.parse_rate` reads it.

    Parameters
    ----------
    value : str or float
        A number (bytes/s) or a string with a unit: ``200mbit`` or
        ``1Gbit/s`` (bits/s, as ``tc`` writes them), ``3MB/s`` (bytes/s).

    Returns
    -------
    float
        Bytes per second.

    Examples
    --------
    >>> parse_rate("200mbit")
    25000000.0
    >>> parse_rate(1e6)
    1000000.0
    """
    return units.parse_rate(value, "`rate`")


def parse_time(value: str | float) -> float:
    """Convert a duration to seconds (``"5ms"`` -> 0.005; numbers are seconds).

    Examples
    --------
    >>> parse_time("250us")
    0.00025
    """
    if isinstance(value, (int, float)):
        t = float(value)
    else:
        m = re.fullmatch(r"\s*([0-9.eE+-]+)\s*([a-zA-Z]*)\s*", value)
        unit = m.group(2).lower() if m else ""
        if m is None or unit not in _TIME_UNITS and unit != "":
            raise ValueError(f"`latency` must look like '5ms' or '200us'; got {value!r}.")
        t = float(m.group(1)) * _TIME_UNITS.get(unit, 1.0)
    if not np.isfinite(t) or t < 0:
        raise ValueError(f"`latency` must be non-negative; got {value!r}.")
    return t


@dataclasses.dataclass(frozen=True)
class Topology:
    """A tree network: hosts in racks, racks in pods, pods on a core.

    Parameters
    ----------
    hosts_per_rack, racks_per_pod, pods : int
        Shape of the tree.  ``pods=1`` gives two levels (racks joined by one
        pod switch).
    racks : sequence of int, optional
        Hosts of every rack, for racks of unequal sizes (e.g. ``(4, 3, 2)``);
        replaces ``hosts_per_rack``.  With one pod ``racks_per_pod`` becomes
        ``len(racks)``; with more, ``len(racks)`` must be ``racks_per_pod *
        pods`` (racks fill pods in order).
    rates : sequence of float or str
        Link rate per level, finest first: host NIC, rack uplink, pod uplink
        (bytes/s, or strings such as ``"1gbit"``).  Levels that do not exist
        (the pod uplink with one pod) are ignored; missing levels repeat the last.
    latency : sequence of float or str, optional
        Extra one-way latency per level (seconds or ``"5ms"``), added by a
        user-space relay on that level's uplinks.  Host level must be 0.

    Examples
    --------
    >>> t = Topology(hosts_per_rack=4, racks_per_pod=2, rates=("1gbit", "200mbit"))
    >>> t.n_hosts, t.levels
    (8, 2)
    >>> t.groups()[0].tolist()
    [0, 0, 0, 0, 1, 1, 1, 1]
    >>> u = Topology(racks=(4, 3, 2))
    >>> u.n_hosts, u.n_racks, u.groups()[0].tolist()
    (9, 3, [0, 0, 0, 0, 1, 1, 1, 2, 2])
    """

    hosts_per_rack: int = 4
    racks_per_pod: int = 2
    pods: int = 1
    rates: tuple[float, ...] = (125e6, 25e6, 25e6)
    latency: tuple[float, ...] = (0.0, 0.0, 0.0)
    racks: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        for name in ("hosts_per_rack", "racks_per_pod", "pods"):
            v = getattr(self, name)
            if int(v) != v or v < 1:
                raise ValueError(f"`{name}` must be a positive integer; got {v!r}.")
        racks = tuple(self.racks)
        if racks:
            if any(int(v) != v or v < 1 for v in racks):
                raise ValueError(f"`racks` must be positive integers; got {racks!r}.")
            racks = tuple(int(v) for v in racks)
            if self.pods == 1:
                object.__setattr__(self, "racks_per_pod", len(racks))
            elif len(racks) != self.racks_per_pod * self.pods:
                raise ValueError(
                    f"`racks` must give {self.racks_per_pod * self.pods} rack sizes "
                    f"({self.pods} pods x {self.racks_per_pod} racks); got {len(racks)}."
                )
            if len(set(racks)) == 1:  # equal racks: the plain shape
                object.__setattr__(self, "hosts_per_rack", racks[0])
                racks = ()
        object.__setattr__(self, "racks", racks)
        if self.n_hosts < 2:
            raise ValueError("the topology must have at least 2 hosts.")
        if self.n_hosts > 250 * 250:
            raise ValueError(f"too many hosts ({self.n_hosts}).")
        rates = [parse_rate(r) for r in self.rates] or [125e6]
        lat = [parse_time(x) for x in self.latency] or [0.0]
        rates += [rates[-1]] * (3 - len(rates))
        lat += [0.0] * (3 - len(lat))
        if lat[0] != 0.0:
            raise ValueError(f"extra latency on the host level is not supported; got {lat[0]!r} s.")
        object.__setattr__(self, "rates", tuple(rates[:3]))
        object.__setattr__(self, "latency", tuple(lat[:3]))

    # -- shape --------------------------------------------------------------
    @property
    def n_racks(self) -> int:
        """Number of racks."""
        return self.racks_per_pod * self.pods

    @property
    def rack_sizes(self) -> tuple[int, ...]:
        """Hosts of every rack."""
        return self.racks or (self.hosts_per_rack,) * self.n_racks

    @property
    def n_hosts(self) -> int:
        """Number of hosts (namespaces)."""
        return sum(self.rack_sizes)

    def rack_hosts(self, rack: int) -> range:
        """Hosts of rack ``rack`` (racks hold consecutive hosts)."""
        start = sum(self.rack_sizes[:rack])
        return range(start, start + self.rack_sizes[rack])

    def pod_hosts(self, pod: int) -> range:
        """Hosts of pod ``pod``."""
        r = self.racks_per_pod
        return range(self.rack_hosts(pod * r).start, self.rack_hosts(pod * r + r - 1).stop)

    @property
    def levels(self) -> int:
        """Number of link levels: 2 (host, rack) or 3 (host, rack, pod)."""
        return 3 if self.pods > 1 else 2

    def rack_of(self, host: int) -> int:
        """Rack of host ``host``."""
        return int(self._racks_of()[host])

    def pod_of(self, host: int) -> int:
        """Pod of host ``host``."""
        return self.rack_of(host) // self.racks_per_pod

    def _racks_of(self) -> np.ndarray:
        return np.repeat(np.arange(self.n_racks), self.rack_sizes)

    def groups(self) -> list[np.ndarray]:
        """Group labels per host, finest first: racks, then pods (if > 1)."""
        racks = self._racks_of()
        out = [racks]
        if self.pods > 1:
            out.append(racks // self.racks_per_pod)
        return out

    def level_of(self, a: int, b: int) -> int:
        """Highest level a transfer from host ``a`` to host ``b`` crosses (0, 1 or 2)."""
        if self.pod_of(a) != self.pod_of(b):
            return 2
        return 1 if self.rack_of(a) != self.rack_of(b) else 0

    def pair_rate(self, level: int) -> float:
        """Rate (bytes/s) of one flow that crosses up to ``level``."""
        return min(self.rates[: level + 1])

    def matrices(self, base_latency: float = 15e-6) -> tuple[np.ndarray, np.ndarray]:
        """Configured one-way latency and pair bandwidth matrices (ground truth).

        ``base_latency`` is the per-hop software latency of an unloaded link.
        """
        n = self.n_hosts
        lat = np.zeros((n, n))
        bw = np.zeros((n, n))
        for a in range(n):
            for b in range(n):
                if a == b:
                    continue
                lv = self.level_of(a, b)
                lat[a, b] = base_latency * (1 + 2 * lv) + 2 * sum(self.latency[1 : lv + 1])
                bw[a, b] = self.pair_rate(lv)
        return lat, bw

    def uplink_bandwidth(self) -> list[np.ndarray]:
        """Uplink rate per group, finest first (matches :meth:`groups`)."""
        out = [np.full(self.n_racks, self.rates[1])]
        if self.pods > 1:
            out.append(np.full(self.pods, self.rates[2]))
        return out

    def address(self, host: int) -> str:
        """IPv4 address of host ``host`` inside the testbed."""
        return f"{_SUBNET}.{host // 250}.{host % 250 + 1}"

    def describe(self) -> str:
        """One line: shape, rates and latencies."""
        racks = (
            f"racks of {','.join(str(v) for v in self.racks)} hosts"
            if self.racks
            else f"{self.racks_per_pod} racks x {self.hosts_per_rack} hosts"
        )
        parts = [
            f"{self.n_hosts} hosts = {self.pods} pod(s) x "
            + (f"{self.racks_per_pod} racks, " if self.racks and self.pods > 1 else "")
            + racks,
            f"host {units.format_rate(self.rates[0], bits=True)}",
            f"rack uplink {units.format_rate(self.rates[1], bits=True)}",
        ]
        if self.pods > 1:
            parts.append(f"pod uplink {units.format_rate(self.rates[2], bits=True)}")
        for lv, name in ((1, "rack"), (2, "pod")):
            if self.latency[lv] > 0 and lv < self.levels:
                parts.append(f"+{self.latency[lv] * 1e3:g} ms per {name} uplink")
        return ", ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able description."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Topology:
        """Inverse of :meth:`to_dict`."""
        kw: dict[str, Any] = {k: (tuple(v) if isinstance(v, list) else v) for k, v in d.items()}
        return cls(**kw)
