"""Pictures of a network and of a solve. Needs matplotlib (``pip install 'rankopt[plot]'``).

Contents
--------
hierarchy
    The matrix ordered by the hierarchy ``solve()`` uses, every group boxed.
heatmap
    The matrix in launch order beside the same matrix in a new order.
ring
    The ring in launch order and in a new order, drawn over the hierarchy,
    each link coloured by the level it crosses.
convergence
    Modelled cost against solve time, relative to the launch order.
level_of_pairs
    For each pair, the finest level at which it shares a group.

Every drawing function takes a :class:`rankopt.Network` (or anything
``solve()`` reads as one: a Measurement, a Cloud, an ``.npz`` path) or a bare
latency matrix. A network brings its own hierarchy, the one ``solve()``
prices; a bare matrix gets the hierarchy ``solve()`` would infer for it
(:meth:`rankopt.Network.from_matrices`). Every function draws into a new
figure and returns it; save it with ``fig.savefig(path)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from rankopt._validation import check_order

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.figure import Figure

    from rankopt.network.core import Network
    from rankopt.solvers.result import SolveResult

__all__ = ["hierarchy", "heatmap", "ring", "convergence", "level_of_pairs"]

#: Colour of a ring link or a group box by the level it stays within
#: (finest first), then the colour of a link that leaves every group.
LEVEL_COLOURS = ("#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b")
ACROSS_COLOUR = "#d62728"


def _figure(**kwargs: Any) -> Figure:
    """A new figure, not registered with pyplot (so nothing keeps it alive but the caller)."""
    try:
        from matplotlib.figure import Figure
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("rankopt.plot needs matplotlib: pip install 'rankopt[plot]'") from exc
    return Figure(layout="constrained", **kwargs)


def _network(obj: Any, groups: Sequence[ArrayLike] | None = None) -> Network:
    """``obj`` as the Network ``solve()`` would see; ``groups`` replace its hierarchy."""
    from rankopt.network.core import Network, as_network

    net = as_network(obj)
    if net is None:
        net = Network.from_matrices(obj, infer=groups is None)
    if groups is not None:
        net = net.with_hierarchy([np.asarray(g, dtype=np.int64) for g in groups])
    return net


def _level_names(net: Network, names: Sequence[str] | None) -> list[str]:
    """What to call each level: hosts, racks and pods when the finest level is the hosts."""
    nlev = len(net.groups)
    if names is not None:
        return list(names)[:nlev] + [f"level {k + 1}" for k in range(len(names), nlev)]
    from rankopt.probe.hierarchy import host_labels

    first_is_hosts = (
        nlev > 0
        and net.hosts is not None
        and bool(np.all(_canonical(net.groups[0]) == _canonical(host_labels(net.hosts))))
    )
    if first_is_hosts:
        base = ["host", "rack", "pod"]
        return base[:nlev] + [f"level {k + 1}" for k in range(3, nlev)]
    return [f"level-{k + 1} group" for k in range(nlev)]


def _canonical(labels: ArrayLike) -> NDArray[np.int64]:
    """Labels renumbered in order of first appearance (to compare partitions)."""
    _, first, inverse = np.unique(np.asarray(labels), return_index=True, return_inverse=True)
    rank = np.argsort(np.argsort(first))
    return rank[inverse].astype(np.int64)


def _scaled(values: NDArray[np.float64], kind: str) -> tuple[NDArray[np.float64], str]:
    """Values in a readable unit: seconds (latency) or bytes/s (bandwidth)."""
    off = values[~np.eye(values.shape[0], dtype=bool)]
    top = float(np.median(off)) if off.size else 1.0
    if kind == "bandwidth":
        steps = ((1e-9, "GB/s"), (1e-6, "MB/s"), (1e-3, "kB/s"), (1.0, "B/s"))
        for factor, unit in steps:
            if top * factor >= 1:
                return values * factor, unit
        return values, "B/s"
    for factor, unit in ((1.0, "s"), (1e3, "ms"), (1e6, "µs"), (1e9, "ns")):
        if top * factor >= 1:
            return values * factor, unit
    return values * 1e9, "ns"


def _rank_ticks(ax: Any, n: int, labels: Sequence[str] | None = None) -> None:
    """Ticks on whole ranks only (every rank up to 16, else a few)."""
    from matplotlib.ticker import MaxNLocator

    if n <= 16:
        ticks = np.arange(n)
        ax.set_xticks(ticks)
        ax.set_yticks(ticks)
        if labels is not None:
            ax.set_xticklabels(labels, rotation=90, fontsize=7)
            ax.set_yticklabels(labels, fontsize=7)
        return
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_locator(MaxNLocator(nbins=8, integer=True))


def _matrix_image(net: Network, values: str) -> tuple[NDArray[np.float64], str, str, str]:
    """The matrix drawn, its colour map, colour-bar label and the quantity's name."""
    kind = values
    if kind == "auto":
        kind = "bandwidth" if net.bandwidth is not None else "latency"
    if kind not in ("latency", "bandwidth"):
        raise ValueError(f"`values` must be 'auto', 'latency' or 'bandwidth'; got {values!r}.")
    if kind == "bandwidth" and net.bandwidth is None:
        raise ValueError(
            "`values='bandwidth'` needs a network with bandwidth; it has latency only."
        )
    raw = np.asarray(net.bandwidth if kind == "bandwidth" else net.latency, dtype=float)
    vals, unit = _scaled(raw, kind)
    off = ~np.eye(vals.shape[0], dtype=bool)
    positive = vals[off & (vals > 0)]
    floor = float(positive.min()) if positive.size else 1.0
    shown = np.where(off & (vals > 0), vals, np.nan)  # the diagonal carries no link
    shown = np.where(np.isnan(shown) & off, floor, shown)
    if kind == "bandwidth":
        return shown, "viridis", f"pair bandwidth ({unit})", kind
    return shown, "viridis_r", f"one-way latency ({unit})", kind


def _lognorm(mat: NDArray[np.float64]) -> Any:
    from matplotlib.colors import LogNorm

    finite = mat[np.isfinite(mat)]
    lo = float(finite.min()) if finite.size else 1.0
    hi = float(finite.max()) if finite.size else 1.0
    return LogNorm(vmin=lo, vmax=max(hi, lo * 1.0001))


def hierarchy(
    network: Any,
    *,
    groups: Sequence[ArrayLike] | None = None,
    values: str = "auto",
    level_names: Sequence[str] | None = None,
) -> Figure:
    """The network's matrix ordered by its hierarchy, every group boxed.

    Processes are sorted by their coarsest group, then the finer ones (then
    by launch rank); each group of more than one process is outlined in the
    colour of its level, and a strip beside the matrix shows the groups of
    every level. The hierarchy is the one ``solve()`` prices: the network's
    own, or for a bare matrix the one :meth:`rankopt.Network.from_matrices`
    infers. Without one, the title says so.

    Parameters
    ----------
    network : Network, Measurement, Cloud, path or array_like (n, n)
        What to draw; a bare matrix is read as latency in seconds.
    groups : sequence of array_like (n,), optional
        Group labels per level, finest first, in place of the network's.
    values : {"auto", "latency", "bandwidth"}
        The matrix shown; ``"auto"`` is bandwidth when known (the hierarchy
        is inferred from it), else latency.
    level_names : sequence of str, optional
        A name for each level (default: host, rack, pod when the finest level
        is the hosts, else level-1 group, ...).

    Returns
    -------
    matplotlib.figure.Figure

    Examples
    --------
    >>> import rankopt
    >>> from rankopt import plot
    >>> cloud = rankopt.synthetic_cloud(2, 2, 4, rng=0)
    >>> fig = plot.hierarchy(cloud)
    >>> fig.axes[0].get_title()
    'pair bandwidth by hierarchy'
    """
    from matplotlib.lines import Line2D
    from matplotlib.patches import Rectangle

    from rankopt.network.core import describe_levels

    net = _network(network, groups)
    n = net.n
    names = _level_names(net, level_names)
    levels = [np.asarray(g, dtype=np.int64) for g in net.groups]
    keys = np.lexsort([np.arange(n)] + levels) if levels else np.arange(n)
    mat, cmap, label, kind = _matrix_image(net, values)
    fig = _figure(figsize=(7.4, 7.0))
    ax = fig.subplots()
    im = ax.imshow(mat[np.ix_(keys, keys)], norm=_lognorm(mat), cmap=cmap, interpolation="nearest")
    _colourbar(fig, im, ax, label)
    # a strip left of the matrix per level with groups of several: one band per group
    width, gap = max(0.8, n / 28), max(0.3, n / 80)
    x = -0.5 - gap
    handles = []
    for k, lab in enumerate(levels):
        sorted_lab = lab[keys]
        cut = np.flatnonzero(np.diff(sorted_lab)) + 1
        starts, ends = np.r_[0, cut], np.r_[cut, n]
        colour = LEVEL_COLOURS[k % len(LEVEL_COLOURS)]
        lw = 1.2 + 0.8 * k
        several = bool((ends - starts).max() > 1)
        for j, (a, b) in enumerate(zip(starts, ends, strict=True)):
            if b - a > 1:
                box = Rectangle((a - 0.5, a - 0.5), b - a, b - a, fill=False, ec=colour, lw=lw)
                ax.add_patch(box)
            if several:
                shade = "#bdbdbd" if j % 2 else "#737373"
                ax.add_patch(Rectangle((x - width, a - 0.5), width, b - a, fc=shade, ec="white"))
        if several:
            ax.text(x - width / 2, n - 0.5 + gap, names[k], rotation=90, ha="center", va="top")
            ax.add_patch(Rectangle((x - width, -0.5), width, n, fill=False, ec=colour, lw=lw))
            x -= width + gap / 2
        u = net.uplinks[k : k + 1] if k < len(net.uplinks) else ()
        text = describe_levels([lab], u)
        handles.append(Line2D([], [], color=colour, lw=lw, label=f"{names[k]}s: {text}"))
    ax.set_xlim(x if x < -0.5 - gap else -0.5, n - 0.5)
    ax.set_ylim(n - 0.5, -0.5)
    labels = [str(int(i)) for i in keys]
    if n <= 24:
        ticks = np.arange(n)
        ax.set_xticks(ticks, labels, fontsize=7)
        ax.set_yticks(ticks, labels, fontsize=7)
    else:
        ticks = np.unique(np.linspace(0, n - 1, 9).round().astype(int))
        ax.set_xticks(ticks, [labels[t] for t in ticks])
        ax.set_yticks(ticks, [labels[t] for t in ticks])
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    ax.set_xlabel("process (launch rank), sorted by group")
    ax.set_ylabel("process (launch rank), sorted by group")
    ax.set_title(f"pair {kind} by hierarchy")
    fig.suptitle(f"{n} processes, {net.source}: {_how(net)}", fontsize=10)
    if handles:
        fig.legend(handles=handles, loc="outside lower center", fontsize=8, frameon=False)
    return fig


def _how(net: Network) -> str:
    """Where the hierarchy came from, in words."""
    count = len(set(net.hosts)) if net.hosts is not None else 0
    hosts = f" ({count} host{'s' if count > 1 else ''})" if count else ""
    if not net.groups:
        return "no hierarchy found" + hosts + ", every pair alike to solve()"
    how = str(net.provenance.get("hierarchy", "given"))
    if how.startswith(("bandwidth", "latency")):
        return "hierarchy inferred from " + how
    return "hierarchy " + how


def _colourbar(fig: Any, im: Any, ax: Any, label: str, **kwargs: Any) -> Any:
    """A colour bar with plain numbers at 1, 2, 5 times powers of ten."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    bar = fig.colorbar(im, ax=ax, label=label, **kwargs)
    bar.ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    bar.ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    bar.ax.yaxis.set_minor_formatter(NullFormatter())
    return bar


def heatmap(
    network: Any, order: ArrayLike, *, values: str = "latency", title: str | None = None
) -> Figure:
    """The matrix in launch order beside the same matrix in ``order``.

    With a good order the hierarchy appears as bright blocks along the
    diagonal (bright = near: low latency, high bandwidth).

    Parameters
    ----------
    network : Network, Measurement, Cloud, path or array_like (n, n)
        What to draw; a bare matrix is read as latency in seconds.
    order : array_like of int (n,)
        ``order[k]`` is the launch rank of the process that gets new rank ``k``.
    values : {"latency", "bandwidth", "auto"}
        The matrix shown (``"auto"``: bandwidth when known).
    title : str, optional
        A title above both panels.

    Returns
    -------
    matplotlib.figure.Figure

    Examples
    --------
    >>> import rankopt
    >>> from rankopt import plot
    >>> c = rankopt.synthetic_cloud(2, 2, 4, rng=0)
    >>> fig = plot.heatmap(c, rankopt.solve(c, rng=0).order)
    >>> len(fig.axes)
    3
    """
    net = _network(network, groups=())
    o = check_order(order, net.n)
    mat, cmap, label, _ = _matrix_image(net, values)
    norm = _lognorm(mat)
    fig = _figure(figsize=(10, 4.6))
    axes = fig.subplots(1, 2)
    for ax, shown, name in (
        (axes[0], mat, "launch order"),
        (axes[1], mat[np.ix_(o, o)], "new order"),
    ):
        im = ax.imshow(shown, norm=norm, cmap=cmap, interpolation="nearest")
        _rank_ticks(ax, net.n)
        ax.set_title(name)
        ax.set_xlabel("rank (destination)")
        ax.set_ylabel("rank (source)")
    _colourbar(fig, im, axes, label, shrink=0.85)
    if title:
        fig.suptitle(title)
    return fig


def level_of_pairs(groups: Sequence[ArrayLike]) -> NDArray[np.int64]:
    """For each pair, the finest level (0 = finest) at which it shares a group.

    ``len(groups)`` when it shares none.

    Examples
    --------
    >>> level_of_pairs([[0, 0, 1, 1], [0, 0, 0, 1]])
    array([[0, 0, 1, 2],
           [0, 0, 1, 2],
           [1, 1, 0, 0],
           [2, 2, 0, 0]])
    """
    labels = [np.asarray(g) for g in groups]
    n = len(labels[0])
    level = np.full((n, n), len(labels), dtype=np.int64)
    for k in range(len(labels) - 1, -1, -1):
        g = labels[k]
        level[g[:, None] == g[None, :]] = k
    return level


def ring(
    network: Any,
    order: ArrayLike,
    groups: Sequence[ArrayLike] | None = None,
    *,
    level_names: Sequence[str] | None = None,
) -> Figure:
    """The ring in launch order and in ``order``, drawn over the hierarchy.

    Processes sit on a circle sorted by their coarsest group, then the finer
    ones; grey arcs outside the circle mark the groups of every level above
    the hosts. Each ring link is a chord coloured by the finest level it stays
    within (a legend names them), so a good order shows short links and few
    red ones. Each panel's title counts the links per level.

    Parameters
    ----------
    network : Network, Measurement, Cloud, path or array_like (n, n)
        A bare matrix is read as latency in seconds.
    order : array_like of int (n,)
        ``order[k]`` is the launch rank of the process that gets new rank ``k``.
    groups : sequence of array_like (n,), optional
        Group labels per level, finest first, in place of the network's
        hierarchy (the one ``solve()`` uses; for a bare matrix, the one
        :meth:`rankopt.Network.from_matrices` infers).
    level_names : sequence of str, optional
        A name for each level (default: host, rack, pod when the finest level
        is the hosts).

    Returns
    -------
    matplotlib.figure.Figure

    Examples
    --------
    >>> import rankopt
    >>> from rankopt import plot
    >>> c = rankopt.synthetic_cloud(2, 2, 4, rng=0)
    >>> fig = plot.ring(c, rankopt.solve(c, rng=0).order)
    >>> len(fig.axes)
    2
    """
    from matplotlib.lines import Line2D

    net = _network(network, groups)
    n = net.n
    o = check_order(order, n)
    gl = [np.asarray(g, dtype=np.int64) for g in net.groups]
    nlev = len(gl)
    names = _level_names(net, level_names)
    keys = np.lexsort([np.arange(n)] + gl) if gl else np.arange(n)
    place = np.empty(n, dtype=float)
    place[keys] = np.arange(n)
    theta = np.pi / 2 - 2 * np.pi * place / n
    xy = np.c_[np.cos(theta), np.sin(theta)]
    level = level_of_pairs(gl) if gl else np.zeros((n, n), dtype=np.int64)
    colours = [LEVEL_COLOURS[k % len(LEVEL_COLOURS)] for k in range(nlev)]
    colours.append(ACROSS_COLOUR if nlev else "#525252")
    words = [f"within {names[k].split()[0]}" for k in range(nlev)]
    words.append("across all groups" if nlev else "ring links")
    if nlev and names[-1] == "pod":
        words[-1] = "across pods"
    fig = _figure(figsize=(10, 5.6))
    axes = fig.subplots(1, 2)
    for ax, ordr, name in ((axes[0], np.arange(n), "launch order"), (axes[1], o, "new order")):
        counts = np.zeros(nlev + 1, dtype=int)
        for k in range(n):
            a, b = int(ordr[k]), int(ordr[(k + 1) % n])
            lv = int(level[a, b])
            counts[lv] += 1
            ax.plot(*xy[[a, b]].T, color=colours[lv], lw=1.4 + 0.5 * lv, alpha=0.9, zorder=2)
        ax.scatter(*xy.T, s=14, c="#252525", zorder=3, edgecolors="none")
        rings = _group_arcs(ax, gl, names, place, n)
        outer = 1.1 + 0.09 * rings
        for i in range(n) if n <= 32 else ():  # launch ranks, outside the arcs
            ax.text(*(outer * xy[i]), str(i), fontsize=7, ha="center", va="center", color="#525252")
        parts = [f"{counts[k]} {words[k]}" for k in range(nlev + 1) if counts[k]]
        ax.set_title(name)
        ax.set_xlabel(", ".join(parts), fontsize=9)
        ax.set_aspect("equal")
        ax.set_xlim(-outer - 0.12, outer + 0.12)
        ax.set_ylim(-outer - 0.12, outer + 0.12)
        ax.set_xticks([])
        ax.set_yticks([])
        for spine in ax.spines.values():
            spine.set_visible(False)
    fig.suptitle(f"{n} processes, {net.source}: {_how(net)}", fontsize=10)
    if nlev:
        handles = [
            Line2D([], [], color=colours[k], lw=1.4 + 0.5 * k, label=words[k])
            for k in range(nlev + 1)
        ]
        fig.legend(
            handles=handles,
            loc="outside lower center",
            ncols=len(handles),
            fontsize=9,
            frameon=False,
            title="ring link, by the finest group it stays within",
            title_fontsize=9,
        )
    return fig


def _group_arcs(
    ax: Any, gl: Sequence[NDArray[np.int64]], names: Sequence[str], place: Any, n: int
) -> int:
    """Grey arcs outside the circle, one ring of arcs per level with groups of several.

    Returns the number of rings drawn.
    """
    step = 2 * np.pi / n
    ring_no = 0
    for k, lab in enumerate(gl):
        if np.bincount(lab).max() <= 1:
            continue
        radius = 1.08 + 0.09 * ring_no
        ring_no += 1
        for g in np.unique(lab):
            pos = np.sort(place[lab == g])
            lo, hi = pos[0] - 0.4, pos[-1] + 0.4
            t = np.pi / 2 - np.linspace(lo * step, hi * step, 32)
            ax.plot(radius * np.cos(t), radius * np.sin(t), color="#969696", lw=2.5 + k)
        t0 = np.pi / 2 + 0.5 * step
        ax.text(
            radius * np.cos(t0),
            radius * np.sin(t0),
            names[k].split()[0] + "s",
            fontsize=7,
            color="#636363",
            ha="right",
            va="bottom",
        )
    return ring_no


def convergence(*results: SolveResult, labels: Sequence[str] | None = None) -> Figure:
    """Modelled cost against solve time, relative to the launch order.

    Each curve starts at the launch order (1.0 at time 0; dotted while the
    solver builds its model and starting order) and steps down to every
    better order the solver found (``result.history``); the end of the curve
    is the result's cost and its modelled speedup is written there. The y
    axis starts at 0, so the drop is seen at its true size.

    Parameters
    ----------
    *results : SolveResult
        One or more solves of the same problem.
    labels : sequence of str, optional
        A legend entry per result (default: method and seed).

    Returns
    -------
    matplotlib.figure.Figure

    Examples
    --------
    >>> import rankopt
    >>> from rankopt import plot
    >>> c = rankopt.synthetic_cloud(2, 4, 8, rng=0)
    >>> fig = plot.convergence(rankopt.solve(c.latency, method="ils", rng=0))
    >>> float(fig.axes[0].get_ylim()[0])
    0.0
    """
    fig = _figure(figsize=(6.4, 4))
    ax = fig.subplots()
    end = max((float(r.runtime_s) for r in results), default=0.0)
    scale, unit = (1e3, "ms") if end < 2.0 else (1.0, "s")
    top = 1.0
    for k, res in enumerate(results):
        h = np.array(res.history if res.history else [(res.runtime_s, res.cost)], dtype=float)
        base = float(res.baseline_cost) if res.baseline_cost > 0 else 1.0
        t = np.r_[0.0, h[:, 0], res.runtime_s] * scale
        c = np.r_[base, h[:, 1], res.cost] / base
        top = max(top, float(c.max()))
        label = labels[k] if labels else f"{res.method} (seed {res.seed})"
        (line,) = ax.step(np.r_[t[1], t[1:]], np.r_[1.0, c[1:]], where="post", label=label)
        # the set-up (model, starting order): nothing better than the launch order yet
        ax.plot(t[:2], [1.0, 1.0], color=line.get_color(), ls=":", lw=line.get_linewidth())
        if k == 0 and t[1] > 0.15 * max(end * scale, 1e-9):
            ax.annotate(
                "set-up: model, starting order",
                (t[1] / 2, 1.0),
                xytext=(0, -12),
                textcoords="offset points",
                ha="center",
                fontsize=8,
                color="#636363",
            )
        ax.annotate(
            f"{res.speedup:.2f}x",
            (t[-1], c[-1]),
            xytext=(4, 4),
            textcoords="offset points",
            color=line.get_color(),
            fontsize=9,
        )
    ax.axhline(1.0, color="#636363", ls="--", lw=1, label="launch order")
    ax.set_xlim(0, max(end * scale, 1e-9) * 1.12)
    ax.set_ylim(0.0, top * 1.08)
    ax.set_xlabel(f"solve time ({unit})")
    ax.set_ylabel("modelled time / launch order's")
    ax.grid(alpha=0.3)
    ax.legend(loc="center right", fontsize=9)
    return fig
