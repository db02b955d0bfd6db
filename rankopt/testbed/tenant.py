"""Another tenant's traffic inside a testbed: the noisy neighbour of a shared cloud.

Contents
--------
TenantSpec
    Which flows (host to host, chosen by host or by rack), how many, TCP as
    fast as it goes (unfair, bursty) or paced at a fixed rate (reproducible),
    optionally on/off in time.
parse_tenant
    The same from ``"rack0->rack1"``-style text (the CLI's ``--tenant``).
Tenant
    Starts the flows in the testbed's own host namespaces (a sink in every
    destination, one source per flow) and stops them; a context manager.

The flows are plain TCP connections between the testbed's hosts, so they
share the hosts' links and the rack and pod uplinks with the job exactly as
another tenant's VMs would. Nothing is started outside the namespaces, and
:func:`rankopt.testbed.teardown` kills whatever is left.
"""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rankopt.testbed.netns import Testbed
from rankopt.testbed.topology import TestbedError, Topology, parse_rate

__all__ = ["Flow", "TenantSpec", "Tenant", "parse_tenant"]

_SCRIPT = str(Path(__file__).with_name("_tenant_flow.py"))
_PORT = 5301


@dataclasses.dataclass(frozen=True)
class Flow:
    """One TCP flow of the tenant from host ``src`` to host ``dst`` (testbed hosts)."""

    src: int
    dst: int


@dataclasses.dataclass(frozen=True)
class TenantSpec:
    """Another tenant's traffic.

    Parameters
    ----------
    flows : sequence of Flow
        The flows (several may join the same pair of hosts).
    rate : float or None
        Bytes/s of every flow, paced; ``None``: as fast as TCP goes.
    on, off : float
        On/off pattern in seconds (``off=0``: always on).
    label : str
        How reports name it.
    proto : "tcp" or "udp"
        TCP flows (paced, or as fast as TCP goes) share a full link with the
        job's transfers; UDP flows (paced only) keep their rate whatever the
        load, as unresponsive traffic does.

    Examples
    --------
    >>> t = Topology(3, 3)
    >>> spec = parse_tenant("rack0->rack1", t, count=3, rate="50mbit")
    >>> [(f.src, f.dst) for f in spec.flows], spec.rate
    ([(0, 3), (1, 4), (2, 5)], 6250000.0)
    >>> spec.describe()
    '3 flows rack0->rack1, TCP paced 50 Mbit/s each'
    """

    flows: tuple[Flow, ...]
    rate: float | None = None
    on: float = 0.0
    off: float = 0.0
    label: str = ""
    proto: str = "tcp"

    def __post_init__(self) -> None:
        if not self.flows:
            raise ValueError("a tenant needs at least one flow.")
        if self.proto not in ("tcp", "udp"):
            raise ValueError(f"`proto` must be 'tcp' or 'udp'; got {self.proto!r}.")
        if self.proto == "udp" and self.rate is None:
            raise ValueError("a UDP tenant needs a `rate` (UDP has no congestion control).")
        if self.rate is not None and not self.rate > 0:
            raise ValueError(f"`rate` must be positive; got {self.rate!r}.")
        if self.off < 0 or (self.off > 0 and not self.on > 0):
            raise ValueError(f"`on`/`off` must be positive seconds; got {self.on!r}/{self.off!r}.")
        for f in self.flows:
            if f.src == f.dst:
                raise ValueError(f"a tenant flow must join two hosts; got {f.src} -> {f.dst}.")

    def describe(self) -> str:
        """One line: flows, rate, pattern."""
        how = (
            "TCP unpaced"
            if self.rate is None
            else f"{self.proto.upper()} paced {self.rate * 8 / 1e6:g} Mbit/s each"
        )
        text = f"{len(self.flows)} flows {self.label or 'custom'}, {how}"
        if self.off > 0:
            text += f", on {self.on:g} s / off {self.off:g} s"
        return text

    def to_dict(self) -> dict[str, Any]:
        """JSON-able description."""
        return {
            "flows": [[f.src, f.dst] for f in self.flows],
            "rate": self.rate,
            "on": self.on,
            "off": self.off,
            "label": self.label,
            "proto": self.proto,
            "describe": self.describe(),
        }


def _hosts_of(token: str, topology: Topology) -> list[int]:
    m = re.fullmatch(r"(rack|r|host|h)(\d+)", token.strip())
    if m is None:
        raise ValueError(f"a tenant endpoint is rackN or hN; got {token!r}.")
    k = int(m.group(2))
    if m.group(1).startswith("r"):
        if k >= topology.n_racks:
            raise ValueError(f"rack {k} does not exist (racks 0..{topology.n_racks - 1}).")
        return list(topology.rack_hosts(k))
    if k >= topology.n_hosts:
        raise ValueError(f"host {k} does not exist (hosts 0..{topology.n_hosts - 1}).")
    return [k]


def parse_tenant(
    spec: str,
    topology: Topology,
    *,
    count: int = 3,
    rate: str | float | None = None,
    on: float = 0.0,
    off: float = 0.0,
    proto: str = "tcp",
) -> TenantSpec:
    """Flows from text: ``"rack0->rack1"``, ``"h0->h5"``, several joined by ``,``.

    Every ``A->B`` part gives ``count`` flows, dealt round-robin over the
    hosts of ``A`` and of ``B`` (a rack's hosts in order).
    """
    flows: list[Flow] = []
    for part in spec.split(","):
        a, sep, b = part.partition("->")
        if not sep:
            raise ValueError(f"`--tenant` parts look like rack0->rack1 or h0->h5; got {part!r}.")
        src, dst = _hosts_of(a, topology), _hosts_of(b, topology)
        for k in range(count):
            flows.append(Flow(src[k % len(src)], dst[k % len(dst)]))
    return TenantSpec(
        tuple(flows),
        rate=None if rate is None else parse_rate(rate),
        on=on,
        off=off,
        label=spec,
        proto=proto,
    )


class Tenant:
    """Run a :class:`TenantSpec` in a testbed that is up (context manager).

    Examples
    --------
    >>> with Testbed(Topology(3, 3)) as tb:                      # doctest: +SKIP
    ...     with Tenant(tb, parse_tenant("rack0->rack1", tb.topology)):
    ...         run_experiment(tb)
    """

    def __init__(self, tb: Testbed, spec: TenantSpec, *, seed: int = 0) -> None:
        self.tb = tb
        self.spec = spec
        self.seed = seed
        self._procs: list[subprocess.Popen[Any]] = []

    def start(self) -> Tenant:
        """Start a sink in every destination host, then one source per flow."""
        t = self.tb.topology
        try:
            for dst in sorted({f.dst for f in self.spec.flows}):
                udp = self.spec.proto == "udp"
                p = self.tb.popen(
                    dst,
                    [
                        sys.executable,
                        _SCRIPT,
                        "usink" if udp else "sink",
                        t.address(dst),
                        str(_PORT),
                    ],
                    stdout=subprocess.PIPE,
                    stderr=subprocess.DEVNULL,
                    text=True,
                )
                self._procs.append(p)
                if p.stdout is None or p.stdout.readline().strip() != "ready":
                    raise TestbedError(f"the tenant's sink on host {dst} did not start.")
            rate = 0.0 if self.spec.rate is None else self.spec.rate
            for k, f in enumerate(self.spec.flows):
                role = "usource" if self.spec.proto == "udp" else "source"
                cmd = [sys.executable, _SCRIPT, role, t.address(f.dst), str(_PORT)]
                cmd += [repr(rate), repr(self.spec.on), repr(self.spec.off), str(self.seed + k)]
                self._procs.append(
                    self.tb.popen(f.src, cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                )
            time.sleep(1.0)  # TCP's slow start and the queues settle
            dead = [p for p in self._procs if p.poll() is not None]
            if dead:
                raise TestbedError(f"{len(dead)} tenant processes ended at start.")
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop every flow and sink this tenant started."""
        for p in self._procs:
            if p.poll() is None:
                p.kill()
        for p in self._procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
            if p.stdout is not None:
                p.stdout.close()
        self._procs.clear()

    @property
    def pids(self) -> Sequence[int]:
        """Process ids of the running flows and sinks."""
        return [p.pid for p in self._procs if p.poll() is None]

    def __enter__(self) -> Tenant:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
