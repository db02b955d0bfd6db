"""Synthetic clouds: processes on hosts in racks in pods, launched in arbitrary order.

A stand-in for a measured matrix when none is at hand (demo, benchmarks,
tests). Latency and bandwidth depend on the deepest level two processes
share (host < rack < pod < cross-pod), with multiplicative noise, a few
congested VMs, slight asymmetry, and the launch order shuffled the way a
scheduler hands out VMs.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from rankopt._files import atomic_write, check_processes, load_npz
from rankopt._rng import normalize_rng
from rankopt._validation import RANGES, RankoptInputError, check_positive

__all__ = ["Cloud", "synthetic_cloud", "load_cloud", "example_path"]

#: One-way latency (s) by shared level: same host, same rack, same pod, cross pod.
DEFAULT_LATENCY = (5e-6, 25e-6, 60e-6, 180e-6)
#: Bandwidth (bytes/s) by shared level.
DEFAULT_BANDWIDTH = (40e9, 25e9 / 8, 10e9 / 8, 5e9 / 8)


@dataclass(frozen=True, eq=False)
class Cloud:
    """A synthetic network, indexed by launch rank.

    Attributes
    ----------
    latency : ndarray (n, n)
        One-way latency in seconds.
    bandwidth : ndarray (n, n)
        Point-to-point bandwidth in bytes/s.
    groups : list of ndarray
        Label arrays, finest level first (host, rack, pod).
    hosts : tuple of str
        Host name of each process, e.g. ``"p1-r0-h3"``.
    seed : int
        Seed that regenerates this cloud.
    """

    latency: NDArray[np.float64]
    bandwidth: NDArray[np.float64]
    groups: list[NDArray[np.int64]]
    hosts: tuple[str, ...]
    seed: int

    @property
    def n(self) -> int:
        return int(self.latency.shape[0])

    def save(self, path: str | os.PathLike[str], *, what: str = "cloud file") -> Path:
        """Write an ``.npz`` (no pickle) readable by :func:`load_cloud` and ``load_matrix``.

        Written atomically with :func:`rankopt._files.atomic_write`: an
        interrupted save leaves neither a partial file nor a temporary one, and
        a symbolic link, FIFO or directory at ``path`` is refused. ``what``
        names ``path`` in errors. Returns ``path``.
        """
        arrays: dict[str, Any] = {
            "latency": self.latency,
            "bandwidth": self.bandwidth,
            "hosts": np.array(self.hosts, dtype=str),
            "groups": np.array(self.groups, dtype=np.int64),
            "seed": np.int64(self.seed),
        }
        return atomic_write(path, lambda fh: np.savez(fh, **arrays), what=what)


def load_cloud(path: str | os.PathLike[str]) -> Cloud:
    """Read a cloud written by :meth:`Cloud.save`.

    Raises
    ------
    FileNotFoundError
        If the file does not exist.
    RankoptInputError
        If it is not a regular ``.npz`` file within the size limits of
        :mod:`rankopt._files`, or lacks a cloud's arrays.
    """
    return cloud_from_arrays(load_npz(path, what="cloud file"), path)


def cloud_from_arrays(z: Mapping[str, Any], path: str | os.PathLike[str]) -> Cloud:
    """The :class:`Cloud` held by the arrays of an ``.npz`` file already read (errors name ``path``)."""
    missing = {"latency", "bandwidth", "hosts", "groups"} - set(z)
    if missing:
        raise RankoptInputError(f"{str(path)!r} is not a cloud file; missing {sorted(missing)}.")
    n = z["latency"].shape[0] if z["latency"].ndim else 0
    if z["groups"].ndim != 2 or z["groups"].shape[1] != n or z["hosts"].shape != (n,):
        raise RankoptInputError(
            f"{str(path)!r}: arrays 'groups' {z['groups'].shape} and 'hosts' "
            f"{z['hosts'].shape} do not match 'latency' {z['latency'].shape}."
        )
    return Cloud(
        latency=z["latency"].astype(float),
        bandwidth=z["bandwidth"].astype(float),
        groups=[g for g in z["groups"]],
        hosts=tuple(str(h) for h in z["hosts"]),
        seed=int(z["seed"]) if "seed" in z else -1,
    )


def example_path() -> Path:
    """The example shipped with the package: 48 VMs, 2 pods x 3 racks x 8 hosts."""
    return Path(__file__).resolve().parent.parent / "data" / "cloud48.npz"


def _check_levels(name: str, values: Any) -> None:
    """The 4 per-level values of ``latency`` or ``bandwidth``, each in its valid range."""
    rng = RANGES[name]
    unit = "latencies in seconds" if name == "latency" else "rates in bytes/s"
    for level, v in zip(("host", "rack", "pod", "cross"), values, strict=False):
        number = isinstance(v, (int, float, np.number)) and not isinstance(v, bool)
        if not number or not (rng.low <= v <= rng.high and (rng.zero or v > 0)):
            raise RankoptInputError(
                f"`{name}` must give 4 {unit}, each in [{rng.low:g}, {rng.high:g}]; the "
                f"{level} {name} is {v!r}."
            )


def synthetic_cloud(
    n_pods: int = 2,
    racks_per_pod: int = 4,
    hosts_per_rack: int = 4,
    ranks_per_host: int = 1,
    *,
    latency: tuple[float, float, float, float] = DEFAULT_LATENCY,
    bandwidth: tuple[float, float, float, float] = DEFAULT_BANDWIDTH,
    noise: float = 0.05,
    asymmetry: float = 0.02,
    congested: float = 0.05,
    congestion_factor: float = 3.0,
    shuffle: bool = True,
    rng: None | int | np.random.Generator = None,
) -> Cloud:
    """Generate a hierarchical cloud.

    Parameters
    ----------
    n_pods, racks_per_pod, hosts_per_rack, ranks_per_host : int
        The hierarchy; ``n = n_pods * racks_per_pod * hosts_per_rack * ranks_per_host``.
    latency, bandwidth : 4 floats
        One-way latency (s) and bandwidth (bytes/s) between two processes
        whose deepest shared level is host, rack, pod, or none.
    noise : float
        Standard deviation of the log-normal factor on every entry.
    asymmetry : float
        Standard deviation of an extra per-direction factor.
    congested : float
        Fraction of VMs whose links are ``congestion_factor`` times slower.
    shuffle : bool
        Shuffle the launch order (as a scheduler does); otherwise processes
        are numbered host by host, rack by rack.
    rng : None, int or Generator

    Returns
    -------
    Cloud

    Raises
    ------
    RankoptInputError
        If an option is invalid, or ``n`` exceeds :data:`rankopt._files.MAX_N`
        (checked before anything is allocated).

    Examples
    --------
    >>> c = synthetic_cloud(2, 2, 2, rng=0)
    >>> c.n, len(c.groups), c.hosts[0]
    (8, 3, 'p1-r0-h0')
    """
    for name, v in (
        ("n_pods", n_pods),
        ("racks_per_pod", racks_per_pod),
        ("hosts_per_rack", hosts_per_rack),
        ("ranks_per_host", ranks_per_host),
    ):
        check_positive(v, name, integer=True)
    if len(latency) != 4 or len(bandwidth) != 4:
        raise RankoptInputError(
            "`latency` and `bandwidth` must give 4 values (host, rack, pod, cross)."
        )
    for name, values in (("latency", latency), ("bandwidth", bandwidth)):
        _check_levels(name, values)
    for name, val in (("noise", noise), ("asymmetry", asymmetry), ("congested", congested)):
        if not 0 <= val < 1:
            raise RankoptInputError(f"`{name}` must be in [0, 1); got {val!r} instead.")
    if not 1 <= congestion_factor <= 1e3:
        raise RankoptInputError(
            f"`congestion_factor` must be in [1, 1000]; got {congestion_factor!r} instead."
        )
    gen, seed = normalize_rng(rng)
    n_hosts = n_pods * racks_per_pod * hosts_per_rack
    n = n_hosts * ranks_per_host
    if n < 2:
        raise RankoptInputError(f"a cloud needs at least 2 processes; got n={n}.")
    check_processes(
        n,
        f"n_pods={n_pods} x racks_per_pod={racks_per_pod} x hosts_per_rack={hosts_per_rack} "
        f"x ranks_per_host={ranks_per_host}",
    )
    proc = np.arange(n)
    host = proc // ranks_per_host
    rack = host // hosts_per_rack
    pod = rack // racks_per_pod
    same_host = host[:, None] == host[None, :]
    same_rack = rack[:, None] == rack[None, :]
    same_pod = pod[:, None] == pod[None, :]
    level = np.where(same_host, 0, np.where(same_rack, 1, np.where(same_pod, 2, 3)))
    lat = np.asarray(latency, float)[level]
    bw = np.asarray(bandwidth, float)[level]
    sym = gen.lognormal(0.0, noise, size=(n, n))
    sym = np.triu(sym) + np.triu(sym, 1).T
    lat = lat * sym * gen.lognormal(0.0, asymmetry, size=(n, n))
    bw = bw / sym
    slow = gen.random(n_hosts) < congested
    slow_proc = slow[host]
    factor = np.where(slow_proc[:, None] | slow_proc[None, :], congestion_factor, 1.0)
    factor[same_host] = 1.0
    lat *= factor
    bw /= factor
    np.fill_diagonal(lat, 0.0)
    np.fill_diagonal(bw, 0.0)
    names = [f"p{pod[i]}-r{rack[i] % racks_per_pod}-h{host[i] % hosts_per_rack}" for i in range(n)]
    perm = gen.permutation(n) if shuffle else np.arange(n)
    lat = lat[np.ix_(perm, perm)]
    bw = bw[np.ix_(perm, perm)]
    groups = [lab[perm].astype(np.int64) for lab in (host, rack, pod)]
    return Cloud(
        latency=np.ascontiguousarray(lat),
        bandwidth=np.ascontiguousarray(bw),
        groups=groups,
        hosts=tuple(names[i] for i in perm),
        seed=seed,
    )
