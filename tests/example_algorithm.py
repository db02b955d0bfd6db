"""An example algorithm, written as a user adds one: one module and one registration line.

``toy_linear`` broadcast: the root sends the whole message to ranks 1, 2, ...,
n - 1, one after another (the ``basic_linear`` broadcast of Open MPI's
``coll/basic``). What rankopt needs of it is one :class:`rankopt.models.Algorithm`:
the step generator, its closed form on a uniform network, that it is not a ring,
and how it is priced (``"step"``: step-synchronous).

Registering it is one line: ``rankopt.models.register_algorithm(TOY_LINEAR)``;
``tests/test_algorithm_contract.py`` does that in a fixture and runs every
suite over it next to the algorithms rankopt ships.
"""

from __future__ import annotations

import numpy as np

from rankopt.models import Algorithm, Layout, Step


def toy_linear(n: int, with_blocks: bool, **_: object) -> tuple[list[Step], Layout]:
    """Rank 0 sends the whole message to rank k at step k - 1."""
    steps = [
        Step(
            src=np.array([0], dtype=np.int64),
            dst=np.array([k], dtype=np.int64),
            frac=np.array([1.0]),
            reduce=False,
            blocks=[(0,)] if with_blocks else None,
        )
        for k in range(1, n)
    ]
    return steps, Layout(1, 1.0)


TOY_LINEAR = Algorithm(
    collective="broadcast",
    name="toy_linear",
    generator=toy_linear,
    doc="the root sends the whole message to every rank in turn (Open MPI's basic_linear)",
    closed_form=lambda p, alpha, nbytes, bandwidth, segment: (p - 1) * (alpha + nbytes / bandwidth),
)
