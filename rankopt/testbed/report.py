"""Plain-text tables of an experiment report (the CLI and bench print these)."""

from __future__ import annotations

from typing import Any

__all__ = ["format_report"]


def _mb(nbytes: int) -> str:
    if nbytes < 1 << 20:
        return f"{nbytes / 1024:g} KB"
    return f"{nbytes / (1 << 20):g} MB"


def format_report(report: dict[str, Any]) -> str:
    """Speedup table, fidelity table and DDP line of :func:`run_experiment`'s report.

    Examples
    --------
    >>> print(format_report({"describe": "8 hosts", "summary": []}))
    8 hosts
    """
    lines = [report.get("describe", "")]
    summary = report.get("summary", [])
    if summary:
        lines += [
            "",
            f"{'engine':<12}{'size':>7}{'launch s':>10}{'rankopt s':>11}"
            f"{'speedup':>9}{'best':>9}{'best s':>9}{'speedup':>9}{'rk/best':>9}"
            f"{'random':>8}",
        ]
        for s in summary:
            rnd = s.get("speedup_random_median")
            lines.append(
                f"{s['engine']:<12}{_mb(s['size']):>7}{s['launch']:>10.3f}{s['rankopt']:>11.3f}"
                f"{s['speedup_rankopt']:>8.2f}x{s['best_label']:>9}{s['best']:>9.3f}"
                f"{s['speedup_best']:>8.2f}x{s['fraction_of_best']:>9.0%}"
                + (f"{rnd:>7.2f}x" if rnd is not None else f"{'-':>8}")
            )
        lines.append(
            "speedup = launch median / order median; rk/best = best median / rankopt "
            "median; random = launch / median of the random orders"
        )
    fid = report.get("fidelity")
    if fid:
        lines += [
            "",
            f"model fidelity: Spearman over {len(fid['measured'])} random orders, "
            f"{_mb(fid['nbytes'])}",
        ]
        for src in ("probe", "topology"):
            if src not in fid:
                continue
            cells = []
            for obj, r in fid[src].items():
                cells.append(
                    f"{obj} {r['spearman']:+.2f}"
                    if "spearman" in r
                    else f"{obj} n/a ({r['error'][:60]})"
                )
            lines.append(f"  model from {src:<8}: " + ", ".join(cells))
    ddp = report.get("ddp")
    if ddp and "gain" in ddp:
        lines += [
            "",
            f"DDP ({ddp['launch']['grad_bytes'] / 1e6:.0f} MB of gradients): launch "
            f"{ddp['launch']['steps_per_s']:.3f} steps/s, rankopt "
            f"{ddp['rankopt']['steps_per_s']:.3f} steps/s, gain {ddp['gain']:.2f}x",
        ]
    return "\n".join(lines)
