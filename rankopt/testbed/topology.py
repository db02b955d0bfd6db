"""Hierarchical networks built from Linux network namespaces.

Contents
--------
Topology
    Description of a tree network: hosts per rack, racks per pod, pods, the
    rate of every level's link and an optional extra one-way latency per level.
Testbed
    Builds a :class:`Topology` (``up``), removes it (``down``, idempotent) and is
    a context manager that always tears down.
parse_rate, parse_time
    ``"200mbit"`` -> bytes/s, ``"5ms"`` -> seconds.

Layout
------
Every host is a namespace ``<prefix>-h<i>`` with one interface ``eth0``
(address ``10.213.<i // 250>.<i % 250 + 1>/16``).  All switches live in one
more namespace, ``<prefix>-fab``: a bridge per rack (``r<j>``), a bridge per pod
(``p<k>``) and, with more than one pod, a core bridge.  Hosts join their rack
bridge through a veth pair shaped to the host rate in both directions; a rack
joins its pod through a veth pair (or, with extra latency, a delay relay)
shaped to the rack uplink rate; pods join the core the same way.  Nothing is
created in the caller's namespace, so deleting the namespaces removes
everything.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
import shutil
import signal
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "Topology",
    "Testbed",
    "TestbedError",
    "parse_rate",
    "parse_time",
    "require_namespaces",
    "existing_namespaces",
    "teardown",
]

logger = logging.getLogger("rankopt")

STATE_DIR = Path(os.environ.get("RANKOPT_TESTBED_STATE", "/run/rankopt-testbed"))
_SUBNET = "10.213"
_MTU = 1500


class TestbedError(RuntimeError):
    """The testbed cannot be built or used on this machine."""

    __test__ = False  # not a pytest test class


_RATE_UNITS = {
    "bit": 1 / 8, "kbit": 1e3 / 8, "mbit": 1e6 / 8, "gbit": 1e9 / 8,
    "bps": 1.0, "b": 1.0, "kb": 1e3, "mb": 1e6, "gb": 1e9,
    "kbps": 1e3, "mbps": 1e6, "gbps": 1e9,
}  # fmt: skip
_TIME_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}


def parse_rate(value: str | float) -> float:
    """Convert a rate to bytes/s.

    Parameters
    ----------
    value : str or float
        A number (bytes/s) or a string with a unit as ``tc`` writes it:
        ``bit``, ``kbit``, ``mbit``, ``gbit`` (bits/s) or ``kbps``/``mbps``/``gbps``
        (bytes/s).

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
    if isinstance(value, (int, float)):
        rate = float(value)
    else:
        m = re.fullmatch(r"\s*([0-9.eE+-]+)\s*([a-zA-Z]*)\s*", value)
        unit = m.group(2).lower() if m else ""
        if m is None or unit not in _RATE_UNITS and unit != "":
            raise ValueError(f"`rate` must look like '200mbit' or '1gbit'; got {value!r}.")
        rate = float(m.group(1)) * _RATE_UNITS.get(unit, 1.0)
    if not np.isfinite(rate) or rate <= 0:
        raise ValueError(f"`rate` must be positive; got {value!r}.")
    return rate


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


def _fmt_rate(rate: float) -> str:
    return f"{rate * 8 / 1e6:g}mbit"


@dataclasses.dataclass(frozen=True)
class Topology:
    """A tree network: hosts in racks, racks in pods, pods on a core.

    Parameters
    ----------
    hosts_per_rack, racks_per_pod, pods : int
        Shape of the tree.  ``pods=1`` gives two levels (racks joined by one
        pod switch).
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
    """

    hosts_per_rack: int = 4
    racks_per_pod: int = 2
    pods: int = 1
    rates: tuple[float, ...] = (125e6, 25e6, 25e6)
    latency: tuple[float, ...] = (0.0, 0.0, 0.0)

    def __post_init__(self) -> None:
        for name in ("hosts_per_rack", "racks_per_pod", "pods"):
            v = getattr(self, name)
            if int(v) != v or v < 1:
                raise ValueError(f"`{name}` must be a positive integer; got {v!r}.")
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
    def n_hosts(self) -> int:
        """Number of hosts (namespaces)."""
        return self.hosts_per_rack * self.racks_per_pod * self.pods

    @property
    def levels(self) -> int:
        """Number of link levels: 2 (host, rack) or 3 (host, rack, pod)."""
        return 3 if self.pods > 1 else 2

    def rack_of(self, host: int) -> int:
        """Rack of host ``host``."""
        return host // self.hosts_per_rack

    def pod_of(self, host: int) -> int:
        """Pod of host ``host``."""
        return host // (self.hosts_per_rack * self.racks_per_pod)

    def groups(self) -> list[np.ndarray]:
        """Group labels per host, finest first: racks, then pods (if > 1)."""
        h = np.arange(self.n_hosts)
        out = [h // self.hosts_per_rack]
        if self.pods > 1:
            out.append(h // (self.hosts_per_rack * self.racks_per_pod))
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
        parts = [
            f"{self.n_hosts} hosts = {self.pods} pod(s) x {self.racks_per_pod} racks x "
            f"{self.hosts_per_rack} hosts",
            f"host {_fmt_rate(self.rates[0])}",
            f"rack uplink {_fmt_rate(self.rates[1])}",
        ]
        if self.pods > 1:
            parts.append(f"pod uplink {_fmt_rate(self.rates[2])}")
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


# ---------------------------------------------------------------------------
def _run(cmd: Sequence[str], check: bool = True) -> subprocess.CompletedProcess[str]:
    logger.debug("testbed: %s", " ".join(cmd))
    p = subprocess.run(list(cmd), capture_output=True, text=True)
    if check and p.returncode != 0:
        raise TestbedError(f"`{' '.join(cmd)}` failed: {p.stderr.strip() or p.returncode}")
    return p


def existing_namespaces(prefix: str) -> list[str]:
    """Names of namespaces that belong to testbed ``prefix``."""
    p = _run(["ip", "netns", "list"], check=False)
    names = [line.split()[0] for line in p.stdout.splitlines() if line.strip()]
    return [s for s in names if s == f"{prefix}-fab" or re.fullmatch(rf"{prefix}-h\d+", s)]


def require_namespaces(prefix: str = "rkt") -> None:
    """Raise :class:`TestbedError` unless this process can build namespaces.

    Checks for root, the ``ip`` command and that a namespace can be created.
    """
    if os.name != "posix" or not hasattr(os, "geteuid"):
        raise TestbedError("the testbed needs Linux network namespaces.")
    if os.geteuid() != 0:
        raise TestbedError(
            "the testbed needs root (it creates network namespaces); run it as root or with sudo."
        )
    if shutil.which("ip") is None or shutil.which("tc") is None:
        raise TestbedError("the testbed needs the `ip` and `tc` commands (iproute2).")
    probe = f"{prefix}-chk{os.getpid()}"
    p = _run(["ip", "netns", "add", probe], check=False)
    if p.returncode != 0:
        raise TestbedError(f"network namespaces are unavailable: {p.stderr.strip()}")
    _run(["ip", "netns", "del", probe], check=False)


def _shape(ns: str, dev: str, rate: float) -> list[str]:
    # tbf: burst of >= 4 ms at the rate (and >= 64 KiB so GSO packets pass),
    # queue of ~25 ms.
    burst = int(max(rate * 0.004, 64 * 1024 + 2 * _MTU))
    limit = int(max(rate * 0.025, 4 * burst))
    return [
        "ip",
        "netns",
        "exec",
        ns,
        "tc",
        "qdisc",
        "replace",
        "dev",
        dev,
        "root",
        "tbf",
        "rate",
        f"{int(rate * 8)}bit",
        "burst",
        str(burst),
        "limit",
        str(limit),
    ]


class Testbed:
    """Build, record and tear down a :class:`Topology` in network namespaces.

    Parameters
    ----------
    topology : Topology
    prefix : str
        Prefix of every namespace name (``<prefix>-fab``, ``<prefix>-h<i>``); pick
        one nobody else on the machine uses.

    Examples
    --------
    >>> from rankopt.testbed import Testbed, Topology
    >>> with Testbed(Topology(hosts_per_rack=2), prefix="rkx") as tb:  # doctest: +SKIP
    ...     print(tb.exec(0, ["ip", "-brief", "addr"]).stdout)
    """

    __test__ = False  # not a pytest test class

    def __init__(self, topology: Topology, prefix: str = "rkt") -> None:
        if not re.fullmatch(r"[a-z][a-z0-9]{1,7}", prefix):
            raise ValueError(f"`prefix` must be 2-8 lowercase letters/digits; got {prefix!r}.")
        self.topology = topology
        self.prefix = prefix
        self._relays: list[subprocess.Popen[str]] = []
        self._old_handlers: dict[int, Any] = {}

    # -- names ----------------------------------------------------------------
    @property
    def fabric(self) -> str:
        """Namespace holding all bridges."""
        return f"{self.prefix}-fab"

    def ns(self, host: int) -> str:
        """Namespace of host ``host``."""
        return f"{self.prefix}-h{host}"

    @property
    def namespaces(self) -> list[str]:
        """Every namespace of this testbed, hosts first."""
        return [self.ns(i) for i in range(self.topology.n_hosts)] + [self.fabric]

    @property
    def state_file(self) -> Path:
        """Where ``up`` records the topology for later ``down``/``check``/``run``."""
        return STATE_DIR / f"{self.prefix}.json"

    # -- lifecycle --------------------------------------------------------------
    def up(self) -> Testbed:
        """Create namespaces, bridges, links and shaping; tear down on any error."""
        require_namespaces(self.prefix)
        if existing_namespaces(self.prefix):
            raise TestbedError(
                f"a testbed with prefix {self.prefix!r} exists; run "
                f"`rankopt testbed down --prefix {self.prefix}` first."
            )
        try:
            self._build()
        except BaseException:
            self.down()
            raise
        STATE_DIR.mkdir(parents=True, exist_ok=True)
        state = {
            "prefix": self.prefix,
            "topology": self.topology.to_dict(),
            "relays": [r.pid for r in self._relays],
        }
        self.state_file.write_text(json.dumps(state))
        logger.info("testbed %s up: %s", self.prefix, self.topology.describe())
        return self

    def _build(self) -> None:
        t = self.topology
        fab = self.fabric
        _run(["ip", "netns", "add", fab])
        _run(["ip", "-n", fab, "link", "set", "lo", "up"])
        for r in range(t.n_racks):
            self._bridge(f"r{r}")
        for p in range(t.pods):
            self._bridge(f"p{p}")
        if t.pods > 1:
            self._bridge("core")
        for h in range(t.n_hosts):
            ns = self.ns(h)
            _run(["ip", "netns", "add", ns])
            _run(["ip", "-n", ns, "link", "set", "lo", "up"])
            _run(
                [
                    "ip",
                    "-n",
                    fab,
                    "link",
                    "add",
                    f"h{h}",
                    "mtu",
                    str(_MTU),
                    "type",
                    "veth",
                    "peer",
                    "name",
                    "eth0",
                    "netns",
                    ns,
                ]
            )
            _run(["ip", "-n", fab, "link", "set", f"h{h}", "master", f"r{t.rack_of(h)}", "up"])
            _run(["ip", "-n", ns, "addr", "add", f"{t.address(h)}/16", "dev", "eth0"])
            _run(["ip", "-n", ns, "link", "set", "eth0", "up"])
            _run(_shape(ns, "eth0", t.rates[0]))
            _run(_shape(fab, f"h{h}", t.rates[0]))
        for r in range(t.n_racks):
            self._uplink(f"r{r}", f"p{r // t.racks_per_pod}", t.rates[1], t.latency[1])
        if t.pods > 1:
            for p in range(t.pods):
                self._uplink(f"p{p}", "core", t.rates[2], t.latency[2])

    def _bridge(self, name: str) -> None:
        fab = self.fabric
        _run(
            [
                "ip",
                "-n",
                fab,
                "link",
                "add",
                name,
                "type",
                "bridge",
                "stp_state",
                "0",
                "forward_delay",
                "0",
            ]
        )
        _run(["ip", "-n", fab, "link", "set", name, "up"])

    def _uplink(self, lower: str, upper: str, rate: float, delay: float) -> None:
        fab = self.fabric
        a, b = f"{lower}u", f"{lower}d"
        if delay > 0:
            from rankopt.testbed.relay import start_relay

            self._relays.append(start_relay(fab, a, b, delay))
            for dev, br in ((a, lower), (b, upper)):
                _run(["ip", "-n", fab, "link", "set", dev, "mtu", str(_MTU)])
                _run(["ip", "-n", fab, "link", "set", dev, "master", br, "up"])
        else:
            _run(
                [
                    "ip",
                    "-n",
                    fab,
                    "link",
                    "add",
                    a,
                    "mtu",
                    str(_MTU),
                    "type",
                    "veth",
                    "peer",
                    "name",
                    b,
                ]
            )
            _run(["ip", "-n", fab, "link", "set", a, "master", lower, "up"])
            _run(["ip", "-n", fab, "link", "set", b, "master", upper, "up"])
        _run(_shape(fab, a, rate))  # lower -> upper
        _run(_shape(fab, b, rate))  # upper -> lower

    def down(self) -> list[str]:
        """Remove every namespace and relay of this prefix; safe to call twice.

        Returns the names of the namespaces that were removed.
        """
        return teardown(self.prefix, extra_pids=[r.pid for r in self._relays])

    # -- use --------------------------------------------------------------------
    def exec(self, host: int, cmd: Sequence[str], **kw: Any) -> subprocess.CompletedProcess[str]:
        """Run ``cmd`` inside host ``host`` and wait for it."""
        return subprocess.run(
            ["ip", "netns", "exec", self.ns(host), *cmd], capture_output=True, text=True, **kw
        )

    def popen(self, host: int, cmd: Sequence[str], **kw: Any) -> subprocess.Popen[Any]:
        """Start ``cmd`` inside host ``host``."""
        return subprocess.Popen(["ip", "netns", "exec", self.ns(host), *cmd], **kw)

    @classmethod
    def attach(cls, prefix: str = "rkt") -> Testbed:
        """The testbed that ``up`` built earlier with this prefix."""
        f = STATE_DIR / f"{prefix}.json"
        if not f.exists() or not existing_namespaces(prefix):
            raise TestbedError(
                f"no testbed with prefix {prefix!r} is up; run "
                f"`rankopt testbed up --prefix {prefix}` first."
            )
        state = json.loads(f.read_text())
        return cls(Topology.from_dict(state["topology"]), prefix=prefix)

    def __enter__(self) -> Testbed:
        self._install_signal_handlers()
        try:
            return self.up()
        except BaseException:
            self._restore_signal_handlers()
            raise

    def __exit__(self, *exc: object) -> None:
        try:
            self.down()
        finally:
            self._restore_signal_handlers()

    def _install_signal_handlers(self) -> None:
        # SIGTERM / SIGHUP become KeyboardInterrupt-like exceptions so that
        # __exit__ runs; SIGINT already raises KeyboardInterrupt.
        def handler(signum: int, frame: object) -> None:
            raise KeyboardInterrupt(f"signal {signum}")

        try:
            for sig in (signal.SIGTERM, signal.SIGHUP):
                self._old_handlers[sig] = signal.signal(sig, handler)
        except ValueError:  # not the main thread
            self._old_handlers.clear()

    def _restore_signal_handlers(self) -> None:
        for sig, h in self._old_handlers.items():
            signal.signal(sig, h)
        self._old_handlers.clear()


def _is_rankopt(pid: int) -> bool:
    try:
        return b"rankopt" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def teardown(prefix: str = "rkt", extra_pids: Sequence[int] = ()) -> list[str]:
    """Remove the namespaces and relays of testbed ``prefix`` (idempotent).

    Processes still running inside the host namespaces are killed first.
    """
    state = STATE_DIR / f"{prefix}.json"
    relays = set(extra_pids)
    if state.exists():
        try:
            relays.update(json.loads(state.read_text()).get("relays", []))
        except (ValueError, OSError):
            pass
    # a recorded pid is only trusted while it still runs rankopt code
    pids = {pid for pid in relays if _is_rankopt(pid)}
    names = existing_namespaces(prefix)
    for ns in names:
        p = _run(["ip", "netns", "pids", ns], check=False)
        pids.update(int(x) for x in p.stdout.split() if x.isdigit())
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    for ns in names:
        _run(["ip", "netns", "del", ns], check=False)
    state.unlink(missing_ok=True)
    if names:
        logger.info("testbed %s down: removed %d namespaces", prefix, len(names))
    return names
