"""Workloads: a job's mix of collective calls, priced with the algorithm each engine runs.

Contents
--------
Call
    One entry of a workload: ``(collective, nbytes, count)``.
PricedCall
    A call with the rankopt model its engine runs for it (and why).
as_workload
    Validate a workload given as tuples, dicts, JSON text or a file.
load_workload
    Read a workload file (a JSON list, or ``collective,nbytes,count`` lines).
price_calls
    Ask an engine which algorithm each call runs.
WorkloadModel
    The total time of the mix: a :class:`~rankopt.models.base.CostModel`, so
    every generic solver (anneal, greedy_cluster, swap, brute_force) takes it.

The objective is ``sum over calls of count * time(call)``, each call's time
being the model of its algorithm at its size on the network (the contention
model when the network has uplinks).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from rankopt._build_check import require_extension
from rankopt._validation import RankoptInputError
from rankopt.models.base import Capabilities, CostModel
from rankopt.units import format_size, parse_size

_swap_eval = require_extension("rankopt.models._swap_eval")

__all__ = [
    "Call",
    "PricedCall",
    "as_workload",
    "load_workload",
    "read_workload_file",
    "price_calls",
    "WorkloadModel",
]


@dataclass(frozen=True)
class Call:
    """``count`` calls of ``collective`` on ``nbytes`` bytes (rankopt's size convention)."""

    collective: str
    nbytes: float
    count: float = 1.0


@dataclass(frozen=True)
class PricedCall:
    """A call and the rankopt model (``algorithm``) of what its engine runs."""

    collective: str
    nbytes: float
    count: float
    algorithm: str
    params: Mapping[str, Any] = field(default_factory=dict, compare=False)

    def describe(self) -> str:
        """One phrase: ``allreduce 16 MiB x40 -> rabenseifner_ompi (tuned, fixed)``."""
        how = ", ".join(
            str(self.params[k]) for k in ("component", "engine_algorithm", "rule")
            if self.params.get(k) is not None
        )  # fmt: skip
        return (
            f"{self.collective} {format_size(self.nbytes)} x{self.count:g} -> {self.algorithm}"
            + (f" ({how})" if how else "")
        )


def _call(item: Any, where: str) -> Call:
    from rankopt.models.schedule import ALGORITHMS

    if isinstance(item, Call):
        c, b, k = item.collective, item.nbytes, item.count
    elif isinstance(item, Mapping):
        try:
            c, b, k = item["collective"], item["nbytes"], item.get("count", 1)
        except KeyError as exc:
            raise RankoptInputError(
                f"workload {where}: a call needs 'collective' and 'nbytes'; missing {exc}."
            ) from None
    elif isinstance(item, (list, tuple)) and len(item) in (2, 3):
        c, b = item[0], item[1]
        k = item[2] if len(item) == 3 else 1
    else:
        raise RankoptInputError(
            f"workload {where}: a call is (collective, nbytes[, count]); got {item!r}."
        )
    if not isinstance(c, str) or c not in ALGORITHMS:
        raise RankoptInputError(
            f"workload {where}: collective must be one of {', '.join(map(repr, ALGORITHMS))}; "
            f"got {_short(c)}."
        )
    nb, cnt = _number(b, "nbytes", where, size=True), _number(k, "count", where)
    if not (0 < nb <= 1e18):
        raise RankoptInputError(f"workload {where}: nbytes must be in (0, 1e18]; got {b!r}.")
    if not (cnt > 0 and math.isfinite(cnt)):
        raise RankoptInputError(f"workload {where}: count must be positive; got {k!r}.")
    return Call(str(c), nb, cnt)


def _short(x: Any) -> str:
    text = repr(x)
    return text if len(text) <= 60 else text[:57] + "..."


def _number(x: Any, name: str, where: str, *, size: bool = False) -> float:
    """A number of a call: a JSON number or, for ``nbytes``, a size such as ``16M``.

    Booleans are refused (JSON ``true`` is not one byte), and so is an integer
    too large for a float.
    """
    if isinstance(x, bool) or not isinstance(x, (int, float, str, np.integer, np.floating)):
        raise RankoptInputError(f"workload {where}: {name} must be a number; got {_short(x)}.")
    if isinstance(x, str):
        try:
            return float(parse_size(x, name)) if size else float(x)
        except ValueError:
            what = "a size such as 16M or 1e6" if size else "a number"
            raise RankoptInputError(
                f"workload {where}: {name} must be {what}; got {_short(x)}."
            ) from None
    try:
        return float(x)
    except OverflowError:
        raise RankoptInputError(
            f"workload {where}: {name} is out of range; got {_short(x)}."
        ) from None


def as_workload(workload: Any) -> tuple[Call, ...]:
    """A workload as a tuple of :class:`Call`.

    Accepts a sequence of ``(collective, nbytes[, count])`` tuples, dicts with
    those keys or :class:`Call`, or a path (:func:`load_workload`).

    Examples
    --------
    >>> as_workload([("allreduce", 25e6, 40), {"collective": "alltoall", "nbytes": 8e6}])
    (Call(collective='allreduce', nbytes=25000000.0, count=40.0), Call(collective='alltoall', nbytes=8000000.0, count=1.0))
    """  # noqa: E501
    if isinstance(workload, (str, Path)) or hasattr(workload, "__fspath__"):
        return load_workload(workload)
    if not isinstance(workload, Iterable) or isinstance(workload, Mapping):
        raise RankoptInputError(
            f"`workload` must be a list of (collective, nbytes, count); got {workload!r}."
        )
    calls = tuple(_call(x, f"entry {i}") for i, x in enumerate(workload))
    if not calls:
        raise RankoptInputError("`workload` is empty: give at least one call.")
    return calls


def load_workload(path: Any) -> tuple[Call, ...]:
    """Read a workload file: a JSON list, or ``collective,nbytes,count`` lines.

    In the line format, ``#`` starts a comment and blank lines are skipped.
    """
    calls, _ = read_workload_file(path, need_calls=True)
    return calls


def read_workload_file(path: Any, *, need_calls: bool = False) -> tuple[tuple[Call, ...], Any]:
    """A workload file's calls and its point-to-point traffic.

    Returns ``(calls, traffic)``: ``traffic`` is the
    :class:`~rankopt.models.traffic.Traffic` of a JSON file with a
    ``"traffic"`` entry (a ``rankopt profile`` of a program that sends
    point-to-point messages), else ``None``; ``calls`` may then be empty.
    A file with neither is refused, as is one without calls when
    ``need_calls``.
    """
    from rankopt._files import parse_json, read_text_file

    p = Path(path)
    text = read_text_file(p, "workload file")
    body = text.strip()
    if body.startswith("[") or body.startswith("{"):
        data = parse_json(body, f"workload file {str(p)!r}")
        traffic = None
        if isinstance(data, Mapping):
            if "traffic" in data:
                from rankopt.models.traffic import as_traffic

                traffic = as_traffic(data["traffic"], where=f"workload file {str(p)!r}: 'traffic'")
            if "workload" not in data and "calls" not in data and traffic is None:
                raise RankoptInputError(
                    f"workload file {str(p)!r}: an object needs a 'workload' (or 'calls') list "
                    f"or a 'traffic' entry; got the keys {sorted(map(str, data))[:8]}."
                )
            data = data.get("workload", data.get("calls"))
            if traffic is not None and not need_calls and isinstance(data, list) and not data:
                return (), traffic
        try:
            return as_workload(data), traffic
        except RankoptInputError as exc:  # the entry is named; the file too
            raise RankoptInputError(f"workload file {str(p)!r}: {exc}") from None
    calls = []
    for lineno, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if line:
            fields = tuple(x.strip() for x in line.split(","))
            calls.append(_call(fields, f"file {str(p)!r}, line {lineno}"))
    if not calls:
        raise RankoptInputError(f"workload file {str(p)!r} holds no calls.")
    return tuple(calls), None


def price_job(
    n: int,
    collective: str,
    algorithm: str,
    nbytes: float | None,
    workload: Sequence[Call] | None,
    engine: Any,
    *,
    nodes: Sequence[Any] | None = None,
) -> tuple[tuple[PricedCall, ...], str, str, float | None]:
    """A job's calls priced: ``(priced, collective, algorithm, nbytes)``.

    The calls are ``workload`` (already read, :func:`as_workload`), else one
    call of ``collective`` at ``nbytes`` (default 16 MiB); each is priced with
    ``engine``'s algorithm at its size, else with ``algorithm``
    (:func:`price_calls`). The job's collective/algorithm/nbytes are the call's
    when there is one, else ``"workload"``, the algorithms joined by ``+``
    and None: what :func:`rankopt.solve` reports and :func:`rankopt.cost`
    prices alike.
    """
    if workload is None:
        from rankopt.network.core import DEFAULT_NBYTES

        size = float(DEFAULT_NBYTES if nbytes is None else nbytes)
        workload = (Call(collective, size, 1.0),)
    priced = price_calls(
        workload, n, engine, algorithm=None if engine is not None else algorithm, nodes=nodes
    )
    if len(priced) == 1:
        return priced, priced[0].collective, priced[0].algorithm, priced[0].nbytes
    return priced, "workload", "+".join(sorted({c.algorithm for c in priced})), None


def price_calls(
    calls: Sequence[Call],
    n: int,
    engine: Any = None,
    *,
    algorithm: str | None = None,
    nodes: Sequence[Any] | None = None,
    env: Mapping[str, str] | None = None,
) -> tuple[PricedCall, ...]:
    """The model of each call: the engine's choice, or ``algorithm`` when no engine is given."""
    from rankopt.models.schedule import check_collective, ring_pattern

    out = []
    if engine is not None:
        from rankopt.engines import get

        eng = get(engine)
        for c in calls:
            alg, params = eng.algorithm(c.collective, c.nbytes, n, env=env, nodes=nodes)
            out.append(PricedCall(c.collective, c.nbytes, c.count, alg, params))
        return tuple(out)
    if algorithm is None:
        raise RankoptInputError("a workload needs an `engine` or an `algorithm` to price it.")
    for c in calls:
        alg = ring_pattern(c.collective, algorithm)
        check_collective(c.collective, alg)
        out.append(PricedCall(c.collective, c.nbytes, c.count, alg, {}))
    return tuple(out)


class WorkloadModel(CostModel):
    """Total modelled time of a workload: ``sum(count * model.cost)`` over its calls.

    Parameters
    ----------
    parts : sequence of (float, CostModel)
        ``(count, model)`` per call; the models share ``n`` and objective.

    Notes
    -----
    Each part keeps its own fast paths; this model only sums them, so the
    cost, the batch cost and a swap delta cost the sum of the parts' own.
    ``network`` is the heaviest part's (for greedy clustering's distances).
    When every part declares a compiled ``swap_search``, the workload
    declares their weighted sum (``SwapSum``), the union of their
    ``partners`` weighted by bytes, and their ``groups`` (one network).
    """

    def __init__(self, parts: Sequence[tuple[float, CostModel]]):
        if not parts:
            raise RankoptInputError("a workload model needs at least one call.")
        self.parts = [(float(k), m) for k, m in parts]
        ns = {m.n for _, m in self.parts}
        if len(ns) != 1:
            raise AssertionError(f"workload parts disagree on n: {sorted(ns)}")
        self.n = ns.pop()
        objectives = sorted({m.objective for _, m in self.parts})
        self.objective = objectives[0] if len(objectives) == 1 else "+".join(objectives)
        #: The network of the part moving the most bytes (``count * nbytes``):
        #: what a constructive solver (greedy clustering) weighs pairs by.
        nets = [
            (k * float(getattr(m.network, "nbytes", 0) or 0), i, m.network)  # type: ignore[attr-defined]
            for i, (k, m) in enumerate(self.parts)
            if getattr(m, "network", None) is not None
        ]
        self.network = max(nets, key=lambda t: t[:2])[2] if nets else None
        net = self.network
        caps = [m.capabilities for _, m in self.parts]
        search = proxy = None
        weights = [k for k, _ in self.parts]
        if all(c.swap_search is not None for c in caps):
            search = _swap_eval.SwapSum([c.swap_search for c in caps], weights)
        if any(c.proxy_search is not None for c in caps) and all(
            c.proxy_search is not None or c.swap_search is not None for c in caps
        ):
            proxy = _swap_eval.SwapSum(
                [c.proxy_search if c.proxy_search is not None else c.swap_search for c in caps],
                weights,
            )
        self.capabilities = Capabilities(
            rotation_invariant=all(m.rotation_invariant for _, m in self.parts),
            latency=None if net is None else net.latency,
            bandwidth=None if net is None else net.bandwidth,
            nbytes=None if net is None else net.nbytes,
            swap_search=search,
            proxy_search=proxy,
            partners=_merged_partners(self.n, self.parts),
            groups=caps[0].groups if all(len(c.groups) for c in caps) else (),
            traffic=next((c.traffic for c in caps if c.traffic is not None), None),
        )

    def reference_cost(self, order: NDArray[np.int64]) -> float:
        return float(sum(k * m.reference_cost(order) for k, m in self.parts))

    def cost(self, order: NDArray[np.int64]) -> float:
        return float(sum(k * m.cost(order) for k, m in self.parts))

    def batch_cost(self, orders: NDArray[np.int64]) -> NDArray[np.float64]:
        total = np.zeros(len(orders), dtype=np.float64)
        for k, m in self.parts:
            total += k * np.asarray(m.batch_cost(orders), dtype=np.float64)
        return total

    def swap_delta(self, order: NDArray[np.int64], i: int, j: int) -> float:
        search = self.capabilities.swap_search
        if search is not None:  # the parts' caches move with the sum's
            return float(search.swap_delta(np.ascontiguousarray(order, dtype=np.int64), i, j))
        return float(sum(k * m.swap_delta(order, i, j) for k, m in self.parts))


def _merged_partners(
    n: int, parts: Sequence[tuple[float, CostModel]]
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.float64]] | None:
    """The parts' rank graphs summed, weighted by ``count * nbytes`` (None if a part has none)."""
    graphs = []
    for k, m in parts:
        g = m.capabilities.partners
        if g is None:
            return None
        ptr, idx, w = g
        size = m.capabilities.nbytes or 1.0
        graphs.append((np.repeat(np.arange(n), np.diff(ptr)) * n + idx, k * size * w))
    if len(graphs) == 1:
        return parts[0][1].capabilities.partners
    key, inv = np.unique(np.concatenate([g[0] for g in graphs]), return_inverse=True)
    weight = np.bincount(inv.reshape(-1), np.concatenate([g[1] for g in graphs]))
    ptr = np.zeros(n + 1, dtype=np.int64)
    ptr[1:] = np.cumsum(np.bincount(key // n, minlength=n))
    return ptr, (key % n).astype(np.int64), weight.astype(np.float64)
