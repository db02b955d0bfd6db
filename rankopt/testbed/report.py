"""Plain-text tables of an experiment report (the CLI and bench print these)."""

from __future__ import annotations

from typing import Any

__all__ = ["format_report", "fraction_band", "summary_table"]


def _mb(nbytes: int) -> str:
    if nbytes < 1 << 20:
        return f"{nbytes / 1024:g} KB"
    return f"{nbytes / (1 << 20):g} MB"


def _x(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}x"


def _s(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}"


def summary_table(summary: list[dict[str, Any]], *, markdown: bool = False) -> list[str]:
    """One row per (engine, size): launch, user path, ideal, best, fraction, modelled.

    Examples
    --------
    >>> s = {"engine": "gloo", "size": 1 << 24, "launch": 4.0, "user": 1.0,
    ...      "ideal": 1.0, "best_label": "user", "best": 1.0, "speedup_user": 4.0,
    ...      "speedup_best": 4.0, "fraction_of_best": 1.0, "modelled_speedup": 3.5,
    ...      "modelled_interval": [3.0, 3.9], "overhead_s": 2.0}
    >>> print(summary_table([s], markdown=True)[2])
    | gloo | 16 MB | - | 4.000 | 1.000 (4.00x) | - | 1.000 (4.00x) | user 1.000 (4.00x) | 100% | 3.50x (3-3.9) | 2.0 |
    """
    head = ["engine", "size", "tenant", "launch s", "user path s", "replayed s", "ideal s", "best s",
            "of best", "modelled", "overhead s (solve)"]  # fmt: skip
    rows = []
    for s in summary:
        base = s["launch"]
        ideal = s.get("ideal")
        lo_hi = s.get("modelled_interval")
        frac = s.get("fraction_of_best")
        rows.append(
            [
                s["engine"],
                _mb(s["size"]),
                "with tenant" if s.get("tenant") else "-",
                _s(base),
                f"{_s(s.get('user'))} ({_x(s.get('speedup_user'))})",
                _s(s.get("user_replay")),
                "-" if ideal is None else f"{ideal:.3f} ({_x(base / ideal)})",
                f"{s['best_label']} {s['best']:.3f} ({_x(s['speedup_best'])})",
                "-"
                if frac is None
                else f"{frac:.0%}" + fraction_band(s.get("fraction_of_best_interval")),
                _x(s.get("modelled_speedup"))
                + ("" if not lo_hi else f" ({lo_hi[0]:.3g}-{lo_hi[1]:.3g})"),
                ("-" if s.get("overhead_s") is None else f"{s['overhead_s']:.1f}")
                + ("" if s.get("solve_s") is None else f" ({s['solve_s']:.2f})"),
            ]
        )
    if markdown:
        return [
            "| " + " | ".join(head) + " |",
            "|" + "|".join("---" for _ in head) + "|",
            *("| " + " | ".join(r) + " |" for r in rows),
        ]
    widths = [max(len(x) for x in col) for col in zip(head, *rows, strict=True)]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in [head, *rows]]


def fraction_band(band: Any) -> str:
    """`` (lo-hi%)``: a fraction's 90% interval, or nothing where there is none.

    >>> fraction_band([0.79, 0.97]), fraction_band(None)
    (' (79-97%)', '')
    """
    return "" if not band else f" ({band[0] * 100:.0f}-{band[1]:.0%})"


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
        lines += ["", *summary_table(summary)]
        lines.append(
            "speedup = launch median / order median; of best = best median / user-path "
            "median (its 90% interval over the calls); replayed = the user path's order "
            "timed with the others; modelled = the speedup the entry point printed (90% "
            "interval); overhead = probe + solve added to the job start (solve: the "
            "solver's own time)"
        )
    for row in summary:
        if row.get("solo"):
            solo = ", ".join(f"{k} {v:.3f}" for k, v in row["solo"].items())
            tenant = " with tenant" if row.get("tenant") else ""
            lines.append(
                f"{row['engine']} {_mb(row['size'])}{tenant}: timed each in a job of its "
                f"own: {solo}; user path {row['fraction_of_best_solo']:.0%} of the best of them"
            )
            if row.get("order_of_best_solo") is not None:
                lines.append(
                    f"  by total time alone: the user path's order "
                    f"{row['order_of_best_solo']:.0%} of the best of them"
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
            f"{ddp['launch']['steps_per_s']:.3f} steps/s, rankopt run "
            f"{ddp['user']['steps_per_s']:.3f} steps/s, gain {ddp['gain']:.2f}x",
        ]
    return "\n".join(lines)
