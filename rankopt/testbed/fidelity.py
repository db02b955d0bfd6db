"""How well do rankopt's cost models rank orders the way a real network does?

Contents
--------
fidelity
    Spearman rank correlation between modelled and measured allreduce times
    over a set of orders, for the objectives ``sum``, ``bottleneck`` and
    ``contention``, with the model fed either the probe's measurement or the
    testbed's configured network.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from rankopt.testbed.topology import Topology

__all__ = ["OBJECTIVES", "fidelity", "measured_network", "truth_network"]

OBJECTIVES = ("sum", "bottleneck", "time", "contention")


def truth_network(topology: Topology, hosts: np.ndarray) -> dict[str, Any]:
    """The configured network over launch ranks (rank ``r`` runs on ``hosts[r]``).

    Returns ``latency``, ``bandwidth``, ``groups`` (finest first) and
    ``uplink_bandwidth`` as keyword arguments for ``rankopt.cost``.
    """
    lat, bw = topology.matrices()
    idx = np.asarray(hosts)
    groups = [g[idx] for g in topology.groups()]
    return {
        "latency": lat[np.ix_(idx, idx)],
        "bandwidth": bw[np.ix_(idx, idx)],
        "groups": groups,
        "uplink_bandwidth": topology.uplink_bandwidth(),
    }


def measured_network(measurement: Any) -> dict[str, Any]:
    """The probe's network as ``rankopt.cost`` keyword arguments.

    ``latency``, ``bandwidth`` and, when a hierarchy was found, ``groups``
    and ``uplink_bandwidth``, all from
    :meth:`rankopt.Network.from_measurement` (the inference every entry
    point uses).
    """
    from rankopt.network.core import Network

    net = Network.from_measurement(measurement)
    out: dict[str, Any] = {"latency": np.asarray(net.latency)}
    if net.bandwidth is not None:
        out["bandwidth"] = np.asarray(net.bandwidth)
    if net.has_uplinks:
        out["groups"] = [np.asarray(g) for g in net.groups]
        out["uplink_bandwidth"] = [np.asarray(u) for u in net.uplinks]
    return out


def _model_costs(
    net: dict[str, Any], orders: Sequence[np.ndarray], objective: str, nbytes: int
) -> list[float]:
    import rankopt

    kw = dict(net)
    latency = kw.pop("latency")
    if objective != "contention":  # pairwise models take no hierarchy
        kw.pop("groups", None)
        kw.pop("uplink_bandwidth", None)
    return [
        float(
            rankopt.cost(  # type: ignore[attr-defined,unused-ignore]
                latency,
                np.asarray(o),
                "allreduce",
                "ring",
                objective=objective,
                nbytes=nbytes,
                **kw,
            )
        )
        for o in orders
    ]


def fidelity(
    measurement: Any,
    orders: Sequence[np.ndarray],
    measured: Sequence[float],
    nbytes: int,
    *,
    topology: Topology | None = None,
    hosts: np.ndarray | None = None,
) -> dict[str, Any]:
    """Spearman correlation of modelled vs measured times, per objective and source.

    Parameters
    ----------
    measurement : Measurement
        rankopt's probe of the launched job (``latency``, ``bandwidth``, ``hosts``).
    orders : sequence of ndarray
        Orders over launch ranks that were timed.
    measured : sequence of float
        Median measured allreduce time of each order (seconds).
    nbytes : int
        Allreduce size the orders were timed at.
    topology, hosts : optional
        The configured network and the placement; adds the ``topology`` source.

    Returns
    -------
    dict
        ``measured`` times, and per source (``probe``, ``topology``) and
        objective the modelled costs and ``spearman``; an objective that the
        installed rankopt cannot evaluate gets ``error`` instead.

    Examples
    --------
    >>> rep = fidelity(m, orders, times, 16 << 20)  # doctest: +SKIP
    >>> rep["probe"]["contention"]["spearman"]  # doctest: +SKIP
    0.95
    """
    from scipy.stats import spearmanr

    sources: dict[str, dict[str, Any]] = {"probe": measured_network(measurement)}
    if topology is not None and hosts is not None:
        sources["topology"] = truth_network(topology, hosts)
    out: dict[str, Any] = {
        "nbytes": nbytes,
        "measured": [float(x) for x in measured],
        "orders": [np.asarray(o).tolist() for o in orders],
    }
    for name, net in sources.items():
        out[name] = {}
        for obj in OBJECTIVES:
            try:
                model = _model_costs(net, orders, obj, nbytes)
            except Exception as exc:  # report, keep going with the other objectives
                out[name][obj] = {"error": f"{type(exc).__name__}: {exc}"}
                continue
            rho = spearmanr(model, measured).statistic
            out[name][obj] = {"model": model, "spearman": float(np.nan_to_num(rho, nan=0.0))}
    return out
