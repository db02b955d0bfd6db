"""The big property run of ``tests/test_properties.py`` (at least 20,000 examples).

Run from the repository root::

    python bench/bench_properties.py                       # 16,000 + 4,000 examples
    python bench/bench_properties.py --contract 2000 --exact 500 --seed 7

Every property test runs with the given number of randomised examples (no
example database); the script prints, per test, the examples run and the
failures found (hypothesis reports each distinct failure, shrunk, with the
seed that replays it), and exits 1 when there was any. CI runs the small
profile of the same tests through ``pytest tests/test_properties.py``.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
import traceback
from pathlib import Path

TESTS = ("contract", "exact")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--contract", type=int, default=16_000, help="examples of the contract")
    parser.add_argument("--exact", type=int, default=4_000, help="examples of exact optimality")
    parser.add_argument("--seed", type=int, default=None, help="hypothesis seed (default: random)")
    args = parser.parse_args(argv)
    seed = random.randrange(2**32) if args.seed is None else args.seed
    os.environ["RANKOPT_PROPERTY_EXAMPLES"] = f"contract={args.contract},exact={args.exact}"
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    import logging

    import test_properties as props
    from hypothesis import seed as hypothesis_seed

    logging.getLogger("rankopt").setLevel(logging.ERROR)  # launch-order warnings are expected
    tests = {
        "contract": props.test_solve_contract,
        "exact": props.test_exact_methods_are_optimal,
    }
    failures = 0
    print(f"hypothesis seed {seed}")
    for name in TESTS:
        t0 = time.perf_counter()
        found = 0
        try:
            hypothesis_seed(seed)(tests[name])()
        except BaseException as exc:  # noqa: BLE001 - every failure is counted and shown
            if isinstance(exc, KeyboardInterrupt):
                raise
            found = len(getattr(exc, "exceptions", None) or [exc])  # an ExceptionGroup: each
            traceback.print_exception(exc)
        failures += found
        print(
            f"{name}: {props.RUN[name]} examples, {found} failures, "
            f"{time.perf_counter() - t0:.0f} s",
            flush=True,
        )
    print(f"total: {sum(props.RUN.values())} examples, {failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
