"""The pictures: what they show agrees with what solve() uses and reports."""

from __future__ import annotations

import numpy as np
import pytest

import rankopt

pytest.importorskip("matplotlib")

from rankopt import plot  # noqa: E402


@pytest.fixture(scope="module")
def cloud_net() -> rankopt.Network:
    return rankopt.Network.from_cloud(rankopt.synthetic_cloud(2, 2, 4, rng=0))


@pytest.fixture(scope="module")
def one_host() -> rankopt.Network:
    gen = np.random.default_rng(1)
    lat = 5e-6 * gen.lognormal(0, 0.3, (4, 4))
    bw = 10e9 * gen.lognormal(0, 0.3, (4, 4))
    return rankopt.Network.from_matrices(lat, bw, hosts=["vm"] * 4)


def _texts(fig) -> str:
    parts = [t.get_text() for t in fig.texts]
    for ax in fig.axes:
        parts += [ax.get_title(), ax.get_xlabel(), ax.get_ylabel()]
    for legend in fig.legends:
        parts += [t.get_text() for t in legend.get_texts()]
    return "\n".join(parts)


def test_ring_counts_every_link_once_and_has_a_legend(cloud_net):
    res = rankopt.solve(cloud_net, rng=0)
    fig = plot.ring(cloud_net, res.order)
    assert len(fig.legends) == 1
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels == ["within host", "within rack", "within pod", "across pods"]
    for ax in fig.axes:
        counts = [int(part.split()[0]) for part in ax.get_xlabel().split(", ")]
        assert sum(counts) == cloud_net.n


def test_ring_links_are_drawn_visibly(cloud_net):
    fig = plot.ring(cloud_net, np.arange(cloud_net.n))
    links = [ln for ln in fig.axes[0].lines if len(ln.get_xdata()) == 2]
    assert len(links) == cloud_net.n
    assert min(ln.get_linewidth() for ln in links) >= 1.4
    assert min(ln.get_alpha() for ln in links) >= 0.9


def test_pictures_of_one_host_say_no_hierarchy_as_solve_does(one_host):
    res = rankopt.solve(one_host)
    assert "no hierarchy found" in res.summary()
    for fig in (plot.ring(one_host, res.order), plot.hierarchy(one_host)):
        text = _texts(fig)
        assert "no hierarchy found" in text
        assert "within rack" not in text


def test_ring_of_a_bare_matrix_uses_the_hierarchy_solve_infers(cloud_net):
    lat = np.array(cloud_net.latency)
    inferred = rankopt.Network.from_matrices(lat)
    fig = plot.ring(lat, np.arange(cloud_net.n))
    shown = len(fig.legends[0].get_texts()) - 1 if fig.legends else 0
    assert shown == len(inferred.groups)


def test_hierarchy_boxes_every_group_of_several(cloud_net):
    fig = plot.hierarchy(cloud_net)
    ax = fig.axes[0]
    boxes = [p for p in ax.patches if not p.get_fill()]
    several = sum(int((np.bincount(g) > 1).sum()) for g in cloud_net.groups)
    strips = sum(1 for g in cloud_net.groups if np.bincount(g).max() > 1)
    assert len(boxes) == several + strips  # a box per group, an outline per strip
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert legend[1].startswith("racks: 4 groups of 4")
    assert "uplink" in legend[2]


def test_hierarchy_sorts_processes_by_group(cloud_net):
    fig = plot.hierarchy(cloud_net)
    labels = [int(t.get_text()) for t in fig.axes[0].get_yticklabels()]
    pods = cloud_net.groups[-1][labels]
    assert np.all(np.diff(pods) >= 0)


def test_heatmap_ticks_are_whole_ranks(one_host):
    fig = plot.heatmap(one_host, [0, 2, 1, 3])
    for ax in fig.axes[:2]:
        assert list(ax.get_xticks()) == [0, 1, 2, 3]
        assert list(ax.get_yticks()) == [0, 1, 2, 3]


def test_heatmap_rejects_a_bad_order(one_host):
    with pytest.raises(ValueError, match="order"):
        plot.heatmap(one_host, [0, 0, 1, 2])


def test_hierarchy_values_must_be_known(one_host):
    with pytest.raises(ValueError, match="`values` must be"):
        plot.hierarchy(one_host, values="rtt")
    with pytest.raises(ValueError, match="needs a network with bandwidth"):
        plot.hierarchy(np.array(one_host.latency), values="bandwidth")


def test_convergence_starts_at_the_launch_order(cloud_net):
    res = rankopt.solve(cloud_net, rng=0)
    fig = plot.convergence(res)
    ax = fig.axes[0]
    lo, hi = ax.get_ylim()
    assert lo == 0.0 and hi >= 1.0
    curve = ax.lines[0]
    assert curve.get_ydata()[0] == 1.0
    assert curve.get_ydata()[-1] == pytest.approx(res.cost / res.baseline_cost)
    assert len(ax.get_xticks()) >= 3
    assert f"{res.speedup:.2f}x" in [t.get_text() for t in ax.texts]


def test_cli_plot_writes_every_kind(tmp_path):
    from rankopt.cli import main

    cloud = tmp_path / "c.npz"
    assert main(["-q", "simulate", "-o", str(cloud), "--pods", "2", "--racks", "2"]) == 0
    assert main(["-q", "plot", str(cloud), "-o", str(tmp_path / "pic"), "--dpi", "40"]) == 0
    for kind in ("hierarchy", "heatmap", "ring", "convergence"):
        assert (tmp_path / f"pic-{kind}.png").stat().st_size > 1000
    out = tmp_path / "h.svg"
    assert main(["-q", "plot", str(cloud), "-o", str(out), "--kind", "hierarchy"]) == 0
    assert out.read_text().startswith("<?xml")


@pytest.mark.parametrize(
    "output, message",
    [
        ("", "--output is an empty path; give the name of a file."),
        ("{d}/pics/", "--output '{d}/pics/' names a directory (it ends in '/'); give a file name."),
    ],
)
def test_cli_plot_output_naming_no_file_is_refused(tmp_path, capsys, output, message):
    """An empty --output or one ending in '/' is refused as given (not read as a stem: the
    pictures went beside the folder as pics-*.png, and '' was reported as '.')."""
    from rankopt.cli import main

    cloud = tmp_path / "c.npz"
    (tmp_path / "pics").mkdir()
    assert main(["-q", "simulate", "-o", str(cloud), "--pods", "1", "--racks", "2"]) == 0
    capsys.readouterr()
    code = main(["-q", "plot", str(cloud), "-o", output.format(d=tmp_path), "--dpi", "40"])
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err
    assert err.strip() == f"rankopt plot: error: {message.format(d=tmp_path)}"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.npz", "pics"]
    assert not any((tmp_path / "pics").iterdir())
