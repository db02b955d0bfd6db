"""Parameters, errors, progress reports, statistics and test hooks of the probes.

Test hooks
----------
Three environment variables, read only by the probe and meant only for tests,
make a process misbehave on purpose:

``RANKOPT_PROBE_TEST_DELAY="RANK:SECONDS[:PEER][,...]"``
    Process ``RANK`` sleeps ``SECONDS`` before every message it sends during
    the measurement (to ``PEER`` only, when given): a slow process or a slow
    pair, which must show up as the slowest entries of the matrices.
``RANKOPT_PROBE_TEST_STALL="RANK:ROUND:SECONDS"``
    Process ``RANK`` sleeps ``SECONDS`` at the start of latency round
    ``ROUND`` (1-based; a stage in the linear latency mode): an unresponsive
    peer, which must make every process
    raise :class:`ProbeTimeoutError`. ``SECONDS`` may be ``stop``: the process
    then stops itself with ``SIGSTOP`` (a hung process that never answers again).
``RANKOPT_PROBE_TEST_SKEW="RANK:ROUND:SECONDS"``
    Process ``RANK`` starts latency round ``ROUND`` ``SECONDS`` late, as a
    process starved of CPU on a loaded machine does: the failure diagnosis
    must still be the same on every process.
``RANKOPT_PROBE_TEST_HOSTS="K"``
    Every process reports the host name ``<host>-v<rank // K>``: one machine
    poses as hosts of ``K`` processes each, so a loopback job exercises the
    schedules of a multi-host one (see :func:`probe_hostname`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import numpy as np
from numpy.typing import NDArray

from rankopt._validation import RankoptInputError, check_positive
from rankopt.errors import ProbeTimeoutError

__all__ = [
    "ProbeTimeoutError",
    "ProbeProgress",
    "ProbeParams",
    "BANDWIDTH_MODES",
    "LATENCY_MODES",
    "AUTO_ALL_PAIRS_MAX_HOSTS",
    "AUTO_LATENCY_ALL_PAIRS_MAX",
    "resolve_bandwidth_mode",
    "resolve_latency_mode",
    "TestHooks",
    "check_params",
    "params_from",
    "median_mad",
    "probe_hostname",
    "RATE_AGREE",
    "transfer_seconds",
    "RANK_ROWS",
    "remapped_parameters",
]

DELAY_ENV = "RANKOPT_PROBE_TEST_DELAY"
STALL_ENV = "RANKOPT_PROBE_TEST_STALL"
SKEW_ENV = "RANKOPT_PROBE_TEST_SKEW"
HOSTS_ENV = "RANKOPT_PROBE_TEST_HOSTS"
#: Bandwidth schedules: every pair (n (n - 1) / 2 transfers); every pair inside the
#: groups that stars find and a sample of each block between two groups
#: (:class:`rankopt.probe.schedule.SampledPlanner`, the rest of a block filled); or
#: the linear one of :mod:`rankopt.probe.linear` (O(hosts) transfers, the rest filled).
BANDWIDTH_MODES = ("auto", "all-pairs", "sampled", "linear")
#: ``bandwidth_mode="auto"`` runs the sampled schedule up to this many hosts (at
#: most 496 host pairs: seconds), and the linear schedule beyond, whose cost grows
#: like the number of hosts.
AUTO_ALL_PAIRS_MAX_HOSTS = 32
#: Latency schedules: the round robin of every pair (n - 1 lockstep rounds), or
#: the linear stages of :mod:`rankopt.probe.linear_latency` (O(n) pairs, the rest
#: filled from the groups).
LATENCY_MODES = ("auto", "all-pairs", "linear")
#: ``latency_mode="auto"`` measures every pair up to this many processes: 63 rounds
#: of small messages cost well under a second on one rack, while each round lasts as
#: long as its slowest pair, so beyond this a single congested VM sets the pace.
AUTO_LATENCY_ALL_PAIRS_MAX = 64


def resolve_bandwidth_mode(mode: str, n_hosts: int, *, groups_given: bool = False) -> str:
    """The schedule ``mode`` runs on ``n_hosts`` hosts: ``"all-pairs"``, ``"sampled"``
    or ``"linear"``.

    With the groups given (a provider's topology), ``"auto"`` is the linear
    schedule at every size: it then discovers nothing.

    >>> resolve_bandwidth_mode("auto", 32), resolve_bandwidth_mode("auto", 33)
    ('sampled', 'linear')
    >>> resolve_bandwidth_mode("auto", 4, groups_given=True)
    'linear'
    """
    if mode != "auto":
        return mode
    if groups_given:
        return "linear"
    return "sampled" if n_hosts <= AUTO_ALL_PAIRS_MAX_HOSTS else "linear"


def resolve_latency_mode(mode: str, n: int) -> str:
    """The latency schedule ``mode`` runs on ``n`` processes: ``"all-pairs"`` or ``"linear"``.

    >>> resolve_latency_mode("auto", 64), resolve_latency_mode("auto", 65)
    ('all-pairs', 'linear')
    """
    if mode != "auto":
        return mode
    return "all-pairs" if n <= AUTO_LATENCY_ALL_PAIRS_MAX else "linear"


@dataclass(frozen=True)
class ProbeProgress:
    """Progress report passed to a probe's ``callback`` after every round, slot or stage.

    Attributes
    ----------
    phase : str
        ``"latency"``, ``"bandwidth"``, ``"recheck"`` or ``"sharing"``.
    step : int
        The round, slot or stage just finished (1-based).
    steps : int
        Number of rounds or slots of the phase; 0 for the stages of the
        linear latency phase, whose number is not known in advance.
    pairs : tuple of (int, int)
        The pairs measured in it (in a linear latency stage: this process's).
    elapsed : float
        Seconds since the probe started.
    """

    phase: str
    step: int
    steps: int
    pairs: tuple[tuple[int, int], ...]
    elapsed: float


@dataclass(frozen=True)
class ProbeParams:
    """Validated probe settings (see :func:`rankopt.probe.mpi.measure`)."""

    latency_bytes: int = 8
    bandwidth_bytes: int = 1 << 20
    repeats: int = 10
    bandwidth_repeats: int = 3
    warmup: int = 1
    timeout: float = 30.0
    bandwidth: bool = True
    bw_concurrency: int = 1
    bandwidth_mode: str = "auto"
    uplink_flows: int = 4
    latency_mode: str = "auto"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def fingerprint(self) -> int:
        """A number that differs when two processes were given different settings."""
        import zlib

        return zlib.crc32(repr(sorted(self.as_dict().items())).encode())


def _check_count(value: Any, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise RankoptInputError(f"`{name}` must be an integer; got {value!r} instead.")
    if value < minimum:
        raise RankoptInputError(f"`{name}` must be at least {minimum}; got {value!r} instead.")
    return int(value)


#: Smallest value of each integer setting of :class:`ProbeParams`.
_MINIMUM = {
    "latency_bytes": 1,
    "bandwidth_bytes": 1,
    "repeats": 1,
    "bandwidth_repeats": 1,
    "warmup": 0,
    "bw_concurrency": 1,
    "uplink_flows": 2,
}


def _check_setting(name: str, value: Any) -> Any:
    """One :class:`ProbeParams` setting, validated (its rule by name)."""
    from rankopt._limits import MAX_TIMEOUT, PROBE_LIMITS, check_bound

    if name in _MINIMUM:
        count = _check_count(value, name, _MINIMUM[name])
        if name in PROBE_LIMITS:
            check_bound(count, name, PROBE_LIMITS[name], "the probe's settings", integer=True)
        return count
    if name == "timeout":
        timeout = check_positive(value, "timeout")
        check_bound(timeout, "timeout", MAX_TIMEOUT, "the probe's settings")
        return timeout
    if name == "bandwidth":
        if not isinstance(value, (bool, np.bool_)):
            raise RankoptInputError(f"`bandwidth` must be True or False; got {value!r} instead.")
        return bool(value)
    for mode_name, modes in (("bandwidth_mode", BANDWIDTH_MODES), ("latency_mode", LATENCY_MODES)):
        if name == mode_name:
            if value not in modes:
                raise RankoptInputError(
                    f"`{name}` must be one of {', '.join(map(repr, modes))}; got {value!r} instead."
                )
            return str(value)
    raise AssertionError(f"ProbeParams.{name} has no rule in _check_setting")  # pragma: no cover


def check_params(
    *, callback: Callable[[ProbeProgress], Any] | None = None, **settings: Any
) -> ProbeParams:
    """Validate the probe settings; raise before any communication happens.

    ``settings`` are fields of :class:`ProbeParams` (the one place their names
    and defaults are written); a missing one takes its default, an unknown
    one is an error.
    """
    known = {f.name: f.default for f in fields(ProbeParams)}
    unknown = sorted(set(settings) - set(known))
    if unknown:
        raise RankoptInputError(
            f"unknown probe setting(s) {', '.join(map(repr, unknown))}; "
            f"the settings are {', '.join(known)}."
        )
    if callback is not None and not callable(callback):
        raise RankoptInputError(f"`callback` must be callable or None; got {callback!r} instead.")
    return ProbeParams(
        **{
            name: _check_setting(name, settings.get(name, default))
            for name, default in known.items()
        }
    )


def params_from(arguments: dict[str, Any]) -> ProbeParams:
    """Validate the settings among a ``measure`` call's arguments (pass ``locals()``)."""
    names = [f.name for f in fields(ProbeParams)]
    return check_params(callback=arguments["callback"], **{k: arguments[k] for k in names})


def root_call(
    options: dict[str, Any],
) -> tuple[ProbeParams, Callable[[ProbeProgress], Any] | None, Any, Any]:
    """The settings (validated), ``callback``, ``cache`` and ``topology`` among
    ``measure_at_root``'s keywords."""
    callback = options.pop("callback", None)
    cache = options.pop("cache", None)
    topology = check_topology(options.pop("topology", None))
    return check_params(callback=callback, **options), callback, cache, topology


def check_topology(topology: Any) -> Any:
    """``topology`` of a ``measure`` call: None or a
    :class:`~rankopt.probe.topology_sources.TopologyLabels` (checked before any
    communication)."""
    if topology is None:
        return None
    from rankopt.probe.topology_sources import TopologyLabels

    if not isinstance(topology, TopologyLabels):
        raise RankoptInputError(
            "`topology` must be a TopologyLabels (rankopt.probe.topology_sources.read_topology); "
            f"got {type(topology).__name__}."
        )
    return topology


def check_root(root: Any, size: int) -> int | None:
    """``root`` of a ``measure_at_root`` call: None, or a rank of the ``size`` probed.

    >>> check_root(0, 4), check_root(None, 4)
    (0, None)
    """
    if root is None:
        return None
    if isinstance(root, bool) or not isinstance(root, (int, np.integer)) or not 0 <= root < size:
        raise RankoptInputError(
            f"`root` must be a rank of the probed group, 0..{size - 1}; got {root!r} instead."
        )
    return int(root)


def probe_hostname(rank: int, environ: dict[str, str] | None = None) -> str:
    """The host name a probe process reports: this machine's, or a test hook's.

    Examples
    --------
    >>> from rankopt.probe._common import probe_hostname
    >>> probe_hostname(5, {"RANKOPT_PROBE_TEST_HOSTS": "4"}).endswith("-v1")
    True
    """
    import socket

    env = os.environ if environ is None else environ
    name = socket.gethostname()
    spec = env.get(HOSTS_ENV, "")
    if not spec:
        return name
    try:
        per_host = int(spec)
        if per_host < 1:
            raise ValueError("must be at least 1")
    except ValueError as exc:
        raise RankoptInputError(f"malformed test hook {HOSTS_ENV}={spec!r}: {exc}") from None
    return f"{name}-v{rank // per_host}"


#: Two timed bandwidth transfers in one direction whose rates agree within this
#: fraction end that direction of the pair: the third is taken only where the first
#: two differ (a link another tenant loads, a transfer that met a stall). In the
#: bandwidth phase one transfer that agrees this closely with a rate its sender
#: already read there ends it too.
RATE_AGREE = 0.02


def transfer_seconds(elapsed: Any, ack_latency: Any) -> Any:
    """One-way time of a transfer timed from its send to its acknowledgement.

    ``elapsed`` less the acknowledgement's one-way latency, never less than half
    of ``elapsed`` (a latency read high cannot make a transfer free). Scalars or
    arrays.

    >>> from rankopt.probe._common import transfer_seconds
    >>> float(transfer_seconds(0.010, 0.001)), float(transfer_seconds(0.010, 0.008))
    (0.009, 0.005)
    """
    return np.maximum(np.subtract(elapsed, ack_latency), np.divide(elapsed, 2.0))


def median_mad(samples: NDArray[np.float64]) -> tuple[float, float]:
    """Median and median absolute deviation (unscaled) of a 1-D sample.

    Examples
    --------
    >>> from rankopt.probe._common import median_mad
    >>> median_mad([1.0, 2.0, 3.0, 10.0])
    (2.5, 1.0)
    """
    x = np.asarray(samples, dtype=np.float64)
    med = float(np.median(x))
    return med, float(np.median(np.abs(x - med)))


@dataclass(frozen=True)
class TestHooks:
    """Deliberate misbehaviour of one process, read from the test-hook variables."""

    __test__ = False  # not a pytest test class

    delays: dict[int, float] = field(default_factory=dict)  # peer (-1: any) -> seconds
    stall_round: int = 0  # 1-based latency round, 0: none
    stall_seconds: float = 0.0  # inf: stop the process (SIGSTOP)
    skew_round: int = 0  # 1-based latency round started late, 0: none
    skew_seconds: float = 0.0

    def delay_to(self, peer: int) -> float:
        return self.delays.get(peer, self.delays.get(-1, 0.0))

    def stall(self) -> None:
        """Sleep ``stall_seconds``, or stop this process for good when it is infinite."""
        if np.isinf(self.stall_seconds):
            import signal

            os.kill(os.getpid(), signal.SIGSTOP)
        else:
            time.sleep(self.stall_seconds)

    @classmethod
    def from_env(cls, rank: int, environ: dict[str, str] | None = None) -> TestHooks:
        env = os.environ if environ is None else environ
        delays: dict[int, float] = {}
        rounds = {STALL_ENV: (0, 0.0), SKEW_ENV: (0, 0.0)}
        try:
            for spec in filter(None, env.get(DELAY_ENV, "").split(",")):
                parts = spec.split(":")
                if int(parts[0]) == rank:
                    peer = int(parts[2]) if len(parts) > 2 else -1
                    delays[peer] = float(parts[1])
            for name in rounds:
                spec = env.get(name, "")
                if spec:
                    who, rnd, secs = spec.split(":")
                    if int(who) == rank:
                        rounds[name] = (int(rnd), np.inf if secs == "stop" else float(secs))
        except ValueError as exc:
            shown = " / ".join(f"{k}={env.get(k, '')!r}" for k in (DELAY_ENV, STALL_ENV, SKEW_ENV))
            raise RankoptInputError(f"malformed test hook {shown}: {exc}") from None
        (stall_round, stall_seconds), (skew_round, skew_seconds) = rounds.values()
        return cls(delays, stall_round, stall_seconds, skew_round, skew_seconds)


#: Probe facts that list pairs of stored ranks in their first two columns.
RANK_ROWS = ("recheck", "sharing", "sharing_alone", "sharing_loaded")


def remapped_parameters(params: Mapping[str, Any], idx: NDArray[np.int64]) -> dict[str, Any]:
    """The probe's facts in the ranks of this launch: process ``k`` is stored ``idx[k]``.

    Per-process group labels are read through ``idx``; rows that name stored
    ranks get this launch's ranks.
    """
    out = dict(params)
    inv = np.empty_like(idx)
    inv[idx] = np.arange(idx.size)
    if isinstance(out.get("groups"), list):
        out["groups"] = [np.asarray(g)[idx].tolist() for g in out["groups"]]
    kept = out.get("inferred_hierarchy")
    if isinstance(kept, Mapping) and isinstance(kept.get("groups"), list):
        groups = [np.asarray(g)[idx].tolist() for g in kept["groups"]]
        out["inferred_hierarchy"] = {**kept, "groups": groups}
    for name in RANK_ROWS:
        if isinstance(out.get(name), list):
            out[name] = [[float(inv[int(r[0])]), float(inv[int(r[1])]), *r[2:]] for r in out[name]]
    return out
