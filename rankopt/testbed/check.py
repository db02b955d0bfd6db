"""Check that a running testbed delivers the configured rates.

Contents
--------
check
    Measure every level's capacity and round-trip time; compare with the topology.
LevelCheck
    One level's configured and measured numbers.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import time
from pathlib import Path

from rankopt.testbed.netns import Testbed
from rankopt.testbed.topology import TestbedError

__all__ = ["LevelCheck", "check"]

_NETPERF = str(Path(__file__).with_name("_netperf.py"))
LEVEL_NAMES = ("host", "rack", "pod")


@dataclasses.dataclass(frozen=True)
class LevelCheck:
    """Configured vs measured capacity of one level.

    ``expected`` and ``measured`` are in bytes/s (TCP goodput of ``flows``
    concurrent flows that all cross this level); ``rtt`` is the median TCP
    round trip in seconds between two hosts whose path tops out at this level.
    """

    level: int
    name: str
    flows: int
    expected: float
    measured: float
    rtt: float

    @property
    def ratio(self) -> float:
        """measured / expected."""
        return self.measured / self.expected

    def ok(self, tolerance: float = 0.15) -> bool:
        """Whether the measured capacity is within ``tolerance`` of the configured one."""
        return abs(self.ratio - 1.0) <= tolerance

    def __str__(self) -> str:
        return (
            f"{self.name:<5} {self.flows} flow(s): configured {self.expected * 8e-6:8.1f} "
            f"Mbit/s, measured {self.measured * 8e-6:8.1f} Mbit/s ({self.ratio:6.1%}), "
            f"rtt {self.rtt * 1e6:8.0f} us"
        )


def _pairs(tb: Testbed, level: int) -> list[tuple[int, int]]:
    t = tb.topology
    if level == 0:
        rack = next((r for r in range(t.n_racks) if t.rack_sizes[r] >= 2), None)
        if rack is None:
            return [(0, 1)]
        h = t.rack_hosts(rack)
        return [(h[0], h[1])]
    a, b = (t.rack_hosts(0), t.rack_hosts(1)) if level == 1 else (t.pod_hosts(0), t.pod_hosts(1))
    k = min(len(a), len(b), 4)
    return [(a[i], b[i]) for i in range(k)]


def _flows(
    tb: Testbed, pairs: list[tuple[int, int]], mode: str, seconds: float, port0: int
) -> list[dict[str, float]]:
    t = tb.topology
    servers = []
    try:
        for i, (_, dst) in enumerate(pairs):
            p = tb.popen(
                dst,
                [
                    sys.executable,
                    _NETPERF,
                    "server",
                    t.address(dst),
                    str(port0 + i),
                    mode,
                    str(min(0.5, seconds / 4)),
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            servers.append(p)
            if p.stdout is None or p.stdout.readline().strip() != "ready":
                raise TestbedError(
                    f"bandwidth server in {tb.ns(dst)} failed: "
                    f"{p.stderr.read() if p.stderr else ''}"
                )
        clients = [
            tb.popen(
                src,
                [
                    sys.executable,
                    _NETPERF,
                    "client",
                    t.address(dst),
                    str(port0 + i),
                    mode,
                    str(seconds),
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for i, (src, dst) in enumerate(pairs)
        ]
        outs = []
        for c, s in zip(clients, servers, strict=True):
            cout, cerr = c.communicate(timeout=seconds + 60)
            sout, serr = s.communicate(timeout=60)
            if c.returncode or s.returncode:
                raise TestbedError(f"bandwidth test failed: {cerr.strip()} {serr.strip()}")
            outs.append(
                json.loads(cout.splitlines()[-1])
                if mode == "rtt"
                else json.loads(sout.splitlines()[-1])
            )
        return outs
    finally:
        for p in servers:
            if p.poll() is None:
                p.kill()
                p.wait()


def check(
    tb: Testbed, *, seconds: float = 2.0, levels: list[int] | None = None
) -> list[LevelCheck]:
    """Measure each level of a running testbed.

    For level 0 one flow between two hosts of a rack; for the rack (pod) level
    up to four concurrent flows from one rack (pod) to another, whose summed
    goodput is the uplink's capacity.  ``expected`` is the configured capacity
    that those flows can reach: ``min(flows * host rate, uplink rates on the path)``.

    Parameters
    ----------
    tb : Testbed
        A testbed that is up.
    seconds : float
        Duration of each throughput test.
    levels : list of int, optional
        Levels to test; default all.

    Returns
    -------
    list of LevelCheck

    Examples
    --------
    >>> results = check(Testbed.attach("rkt"))  # doctest: +SKIP
    >>> all(r.ok(0.15) for r in results)  # doctest: +SKIP
    True
    """
    t = tb.topology
    out = []
    for lv in levels if levels is not None else range(t.levels):
        if lv == 1 and t.racks_per_pod < 2 and t.pods > 1:
            continue
        pairs = _pairs(tb, lv)
        rtt = _flows(tb, pairs[:1], "rtt", 0.5, 5300)[0]["rtt"]
        time.sleep(0.1)
        res = _flows(tb, pairs, "bw", seconds, 5400)
        measured = sum(r["rate"] for r in res)
        expected = min([len(pairs) * t.rates[0], *t.rates[1 : lv + 1]])
        out.append(LevelCheck(lv, LEVEL_NAMES[lv], len(pairs), expected, measured, rtt))
    return out
