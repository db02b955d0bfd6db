"""Build a :class:`~rankopt.testbed.topology.Topology` from Linux network namespaces.

Contents
--------
Testbed
    Builds a :class:`Topology` (``up``), removes it (``down``, idempotent) and is
    a context manager that always tears down.
teardown, require_namespaces, existing_namespaces
    Remove a testbed by prefix; check for root and namespaces; list them.

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

import contextlib
import json
import logging
import os
import re
import shutil
import signal
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from rankopt._files import atomic_write_text
from rankopt.testbed.topology import TestbedError, Topology

__all__ = ["Testbed", "teardown", "require_namespaces", "existing_namespaces"]

logger = logging.getLogger("rankopt")

STATE_DIR = Path(os.environ.get("RANKOPT_TESTBED_STATE", "/run/rankopt-testbed"))
_MTU = 1500


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
        atomic_write_text(self.state_file, json.dumps(state), what="testbed state file")
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

    def set_uplink_rate(self, group: str, rate: float) -> None:
        """Reshape one uplink, both directions, while the testbed runs.

        Parameters
        ----------
        group : str
            ``"r<i>"`` for rack ``i``'s uplink, ``"p<i>"`` for pod ``i``'s.
        rate : float
            New rate in bytes/s.

        Raises
        ------
        TestbedError
            If the testbed has no such uplink or the rate is not positive.
        """
        t = self.topology
        known = {f"r{r}" for r in range(t.n_racks)}
        if t.pods > 1:
            known |= {f"p{p}" for p in range(t.pods)}
        if group not in known:
            raise TestbedError(f"`group` must be one of {sorted(known)}; got {group!r}.")
        if not rate > 0:
            raise TestbedError(f"`rate` must be positive bytes/s; got {rate!r}.")
        for dev in (f"{group}u", f"{group}d"):
            _run(_shape(self.fabric, dev, rate))

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

    @contextlib.contextmanager
    def interruptible(self) -> Iterator[Testbed]:
        """Inside, SIGTERM and SIGHUP raise ``KeyboardInterrupt``, as they do while a
        testbed built with ``with Testbed(...)`` is up: a job started in the testbed is
        then killed (its process group) when this process is asked to stop, instead of
        running on in the namespaces. For a testbed this process attached to
        (:meth:`attach`) and does not take down."""
        self._install_signal_handlers()
        try:
            yield self
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
