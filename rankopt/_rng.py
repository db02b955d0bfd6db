"""Random-number handling (SciPy SPEC 7): ``rng`` is None, an int or a Generator."""

from __future__ import annotations

import numpy as np

from rankopt._validation import RankoptInputError

__all__ = ["normalize_rng", "kernel_seed"]


def normalize_rng(rng: None | int | np.random.Generator) -> tuple[np.random.Generator, int]:
    """Return ``(generator, seed)`` where ``seed`` replays the run.

    A fresh seed is drawn when ``rng`` is None or a Generator, so every result
    records the integer that reproduces it with ``rng=seed``.
    """
    if rng is None:
        seed = int(np.random.SeedSequence().generate_state(1, dtype=np.uint32)[0])
    elif isinstance(rng, np.random.Generator):
        seed = int(rng.integers(0, 2**32 - 1))
    elif isinstance(rng, (int, np.integer)) and not isinstance(rng, bool):
        if rng < 0:
            raise RankoptInputError(f"`rng` must be a non-negative integer; got {rng}.")
        seed = int(rng)
    else:
        raise RankoptInputError(
            f"`rng` must be None, an int or a numpy.random.Generator; got {rng!r} instead."
        )
    return np.random.default_rng(seed), seed


def kernel_seed(gen: np.random.Generator) -> int:
    """Draw a 63-bit seed for a compiled kernel's own generator."""
    return int(gen.integers(1, 2**63 - 1))
