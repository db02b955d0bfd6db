"""Progress of long steps, shown where users look.

Under ``mpiexec``, ``srun`` or ``torchrun`` standard error is a pipe, never a
terminal, so a bar that redraws itself would either never show or fill a log
with carriage returns. :class:`Progress` therefore has two faces:

- on a terminal, a ``tqdm`` bar per phase;
- elsewhere, plain lines at a modest rate: at most one every ``interval``
  seconds while a phase runs, and one when it ends (for a quick phase only
  when it is one of the probe's, so every probe leaves a line per phase and
  a quick solve none)::

      rankopt: probe latency: 21/39 rounds, 2.0 s
      rankopt: probe latency: 39/39 rounds in 3.9 s

Only one process of a job should show progress (rank 0); every entry point
builds it with ``enabled=rank == 0 and not quiet``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import IO, Any

__all__ = ["Progress"]


class Progress:
    """Phases with a count of steps, reported on ``stream`` (default: standard error).

    Parameters
    ----------
    prog : str
        What the lines start with (``"rankopt probe"``, ``"rankopt.mpi"``).
    enabled : bool
        False: say nothing (``-q``, or a rank other than 0).
    stream : file, optional
        Where to write; standard error by default.
    interval : float
        Least seconds between two plain lines of one phase.
    bar : bool, optional
        Draw a bar; default: when ``stream`` is a terminal.

    Examples
    --------
    >>> import io
    >>> out = io.StringIO()
    >>> p = Progress("demo", stream=out, interval=0)
    >>> p.start("probe latency", 2, "rounds")
    >>> p.update(1); p.update(2); p.finish()
    >>> print(out.getvalue().replace("0.0 s", "T"), end="")
    demo: probe latency: 1/2 rounds, T
    demo: probe latency: 2/2 rounds in T
    """

    def __init__(
        self,
        prog: str,
        *,
        enabled: bool = True,
        stream: IO[str] | None = None,
        interval: float = 2.0,
        bar: bool | None = None,
    ) -> None:
        self.prog = prog
        self.enabled = enabled
        self.stream = stream
        self.interval = interval
        self._bar_wanted = bar
        self._phase: str | None = None
        self._total = 0
        self._unit = ""
        self._step = 0
        self._t0 = 0.0
        self._last = 0.0
        self._told = False
        self._always = False
        self._bar: Any = None

    # -- output ---------------------------------------------------------------------
    def _out(self) -> IO[str]:
        return self.stream if self.stream is not None else sys.stderr

    def _use_bar(self) -> bool:
        if self._bar_wanted is not None:
            return self._bar_wanted
        try:
            return bool(self._out().isatty())
        except (AttributeError, ValueError):
            return False

    def say(self, text: str) -> None:
        """One line, now (a bar in progress is kept below it)."""
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.write(f"{self.prog}: {text}", file=self._out())
            return
        out = self._out()
        out.write(f"{self.prog}: {text}\n")
        out.flush()

    # -- phases ---------------------------------------------------------------------
    def start(
        self, phase: str, total: int = 0, unit: str = "steps", *, always: bool = False
    ) -> None:
        """Begin ``phase`` of ``total`` steps (0: a count not known in advance).

        ``always``: its end is told even when it was quick (the probe's phases,
        so every probe leaves its two lines).
        """
        self.finish()
        self._phase, self._total, self._unit = phase, int(total), unit
        self._always = always
        self._step = 0
        self._t0 = self._last = time.monotonic()
        self._told = False
        if not self.enabled:
            return
        if self._use_bar():
            from tqdm import tqdm

            self._bar = tqdm(
                total=self._total or None,
                desc=f"{self.prog}: {phase}",
                unit=f" {unit}",
                file=self._out(),
                leave=False,
                dynamic_ncols=True,
            )

    def update(self, step: int, detail: str = "") -> None:
        """``step`` steps of the phase are done."""
        if self._phase is None:
            return
        done, self._step = step - self._step, step
        if not self.enabled:
            return
        now = time.monotonic()
        if self._bar is not None:
            self._bar.update(max(done, 0))
            if detail:
                self._bar.set_postfix_str(detail, refresh=False)
            return
        if now - self._last < self.interval or (self._total and step >= self._total):
            return  # the last step is told by finish()
        self._last = now
        self._told = True
        of = f"/{self._total}" if self._total else ""
        more = f", {detail}" if detail else ""
        count = f"{step}{of} {self._unit}, " if self._unit else ""
        self.say(f"{self._phase}: {count}{now - self._t0:.1f} s{more}")

    def finish(self, detail: str = "") -> None:
        """End the phase in progress (if any) with its total time."""
        if self._phase is None:
            return
        phase, self._phase = self._phase, None
        if not self.enabled:
            return
        elapsed = time.monotonic() - self._t0
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        if not (self._told or self._always) and elapsed < self.interval:
            return  # a quick phase stays silent
        of = f"/{self._total}" if self._total else ""
        more = f" ({detail})" if detail else ""
        count = f": {self._step}{of} {self._unit}" if self._unit else ""
        self.say(f"{phase}{count} in {elapsed:.1f} s{more}")

    def probe_callback(self) -> Callable[[Any], None] | None:
        """A probe ``callback``: a phase per probe phase, a step per round, slot or stage.

        None when disabled, so the probe skips the calls altogether.
        """
        if not self.enabled:
            return None
        units = {"latency": "rounds", "bandwidth": "slots"}

        last = [0.0]  # the probe's elapsed seconds at the previous report

        def callback(p: Any) -> None:
            phase = f"probe {p.phase}"
            if self._phase != phase:
                unit = units.get(p.phase, "steps") if p.steps else "stages"
                self.start(phase, p.steps, unit, always=True)
                # the phase began when the previous one ended, not at its first report
                self._t0 -= max(float(p.elapsed) - last[0], 0.0)
            last[0] = float(p.elapsed)
            self.update(p.step)

        return callback
