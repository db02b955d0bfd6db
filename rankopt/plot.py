"""Pictures of a solve: the matrix before and after, the ring over the hierarchy,
and the convergence curve. Needs matplotlib (``pip install rankopt[plot]``).

Every function draws into a new figure and returns it; save it with
``fig.savefig(path)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from rankopt._validation import check_matrix, check_order

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.figure import Figure

    from rankopt.solvers.result import SolveResult

__all__ = ["heatmap", "ring", "convergence", "level_of_pairs"]


def _plt() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("rankopt.plot needs matplotlib: pip install 'rankopt[plot]'") from exc
    return plt


def _scaled(lat: NDArray[np.float64]) -> tuple[NDArray[np.float64], str]:
    off = lat[~np.eye(lat.shape[0], dtype=bool)]
    top = float(np.median(off)) if off.size else 1.0
    for factor, unit in ((1.0, "s"), (1e3, "ms"), (1e6, "µs"), (1e9, "ns")):
        if top * factor >= 1:
            return lat * factor, unit
    return lat * 1e9, "ns"


def heatmap(latency: ArrayLike, order: ArrayLike, *, title: str | None = None) -> Figure:
    """The matrix in launch order beside the same matrix in ``order``.

    With a good order the hierarchy appears as blocks along the diagonal.

    Examples
    --------
    >>> import rankopt
    >>> c = rankopt.synthetic_cloud(2, 2, 4, rng=0)
    >>> fig = heatmap(c.latency, rankopt.solve(c, rng=0).order)
    >>> len(fig.axes)
    3
    """
    lat = check_matrix(latency)
    o = check_order(order, lat.shape[0])
    plt = _plt()
    vals, unit = _scaled(lat)
    positive = vals[vals > 0]
    vmin = float(positive.min()) if positive.size else 1e-9
    from matplotlib.colors import LogNorm

    norm = LogNorm(vmin=vmin, vmax=max(float(vals.max()), vmin * 1.0001))
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.6), constrained_layout=True)
    shown = np.where(vals > 0, vals, vmin)
    for ax, mat, name in (
        (axes[0], shown, "launch order"),
        (axes[1], shown[np.ix_(o, o)], "optimised order"),
    ):
        im = ax.imshow(mat, norm=norm, cmap="viridis", interpolation="nearest")
        ax.set_title(name)
        ax.set_xlabel("new rank (destination)")
        ax.set_ylabel("new rank (source)")
    fig.colorbar(im, ax=axes, shrink=0.85, label=f"one-way latency ({unit})")
    if title:
        fig.suptitle(title)
    return fig


def level_of_pairs(groups: list[NDArray[np.int64]]) -> NDArray[np.int64]:
    """For each pair, the first hierarchy level (0 = finest) at which it shares a group;
    ``len(groups)`` when it shares none."""
    n = len(groups[0])
    level = np.full((n, n), len(groups), dtype=np.int64)
    for k in range(len(groups) - 1, -1, -1):
        g = np.asarray(groups[k])
        level[g[:, None] == g[None, :]] = k
    return level


def ring(
    latency: ArrayLike,
    order: ArrayLike,
    groups: Sequence[ArrayLike] | None = None,
    *,
    level_names: list[str] | None = None,
) -> Figure:
    """The ring in launch order and in ``order``, drawn over the hierarchy.

    Processes sit on a circle grouped by the coarsest level, then the finer
    ones (colour = coarsest group); each ring edge is coloured by the level it
    crosses, so a good order shows few long, red edges. ``groups`` defaults to
    :func:`rankopt.infer_hierarchy` when available, else one group.

    Examples
    --------
    >>> import rankopt
    >>> c = rankopt.synthetic_cloud(2, 2, 4, rng=0)
    >>> fig = ring(c.latency, rankopt.solve(c, rng=0).order, c.groups)
    >>> len(fig.axes)
    2
    """
    lat = check_matrix(latency)
    n = lat.shape[0]
    o = check_order(order, n)
    gl = _infer(lat) if groups is None else [np.asarray(g, dtype=np.int64) for g in groups]
    plt = _plt()
    keys = np.lexsort([np.arange(n)] + gl)  # coarsest level is the primary key
    place = np.empty(n, dtype=float)
    place[keys] = np.arange(n)
    theta = 2 * np.pi * place / n
    xy = np.c_[np.cos(theta), np.sin(theta)]
    level = level_of_pairs(gl) if gl else np.zeros((n, n), dtype=np.int64)
    nlev = len(gl)
    names = level_names or (["host", "rack", "pod"][:nlev] + [f"level {k}" for k in range(3, nlev)])
    cmap = plt.get_cmap("RdYlGn_r", nlev + 1)
    top = gl[-1] if gl else np.zeros(n, dtype=np.int64)
    fig, axes = plt.subplots(1, 2, figsize=(10, 5), constrained_layout=True)
    for ax, ordr, name in (
        (axes[0], np.arange(n), "launch order"),
        (axes[1], o, "optimised order"),
    ):
        counts = np.zeros(nlev + 1, dtype=int)
        for k in range(n):
            a, b = ordr[k], ordr[(k + 1) % n]
            lv = level[a, b]
            counts[lv] += 1
            ax.plot(*xy[[a, b]].T, color=cmap(lv), lw=1.0 + 1.5 * lv / max(nlev, 1), alpha=0.85)
        ax.scatter(*xy.T, c=top, cmap="tab10", s=18, zorder=3, edgecolors="none")
        crossing = ", ".join(
            f"{counts[k]} within {names[k]}" if k < nlev else f"{counts[k]} across all"
            for k in range(nlev + 1)
            if counts[k]
        )
        ax.set_title(f"{name}\n{crossing}", fontsize=9)
        ax.set_aspect("equal")
        ax.axis("off")
    return fig


def _infer(lat: NDArray[np.float64]) -> list[NDArray[np.int64]]:
    try:
        from rankopt.probe.hierarchy import infer_hierarchy
    except ImportError:  # pragma: no cover
        return [np.zeros(lat.shape[0], dtype=np.int64)]
    levels = infer_hierarchy(latency=lat)
    return list(levels) if len(levels) else [np.zeros(lat.shape[0], dtype=np.int64)]


def convergence(*results: SolveResult, labels: list[str] | None = None) -> Figure:
    """Best cost against time for one or more solves (``result.history``).

    Examples
    --------
    >>> import rankopt
    >>> c = rankopt.synthetic_cloud(2, 4, 8, rng=0)
    >>> fig = convergence(rankopt.solve(c.latency, method="ils", rng=0))
    >>> fig.axes[0].get_xlabel()
    'time (ms)'
    """
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.4, 4), constrained_layout=True)
    for k, res in enumerate(results):
        h = np.array(res.history if res.history else [(res.runtime_s, res.cost)], dtype=float)
        t = np.r_[h[:, 0], res.runtime_s] * 1e3
        c = np.r_[h[:, 1], res.cost]
        label = labels[k] if labels else f"{res.method} (seed {res.seed})"
        ax.step(t, c / res.baseline_cost, where="post", label=label)
    ax.set_xlabel("time (ms)")
    ax.set_ylabel("modelled cost / launch-order cost")
    ax.set_xscale("symlog", linthresh=1.0)
    ax.grid(alpha=0.3)
    ax.legend()
    return fig
