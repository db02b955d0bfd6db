"""``rankopt verify`` against the testbed's own timing, for the same orders.

Builds a testbed (root, network namespaces), runs ``rankopt testbed run`` on it
(the user's path with no flags, then every order timed in separate jobs), and
then, on the same testbed and the same launch, ``rankopt verify`` twice under
mpirun: with the user path's order as the candidate and with the launch order
itself (which must give "no measurable gain": a check that the verdict can
fail). Prints both speedups side by side and their ratio.

Run (root)::

    python bench/testbed_verify.py --racks 3,3,3 --launch random --seed 4 --size 16
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from _testbed_common import rankopt as _rankopt


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--racks", default="3,3,3")
    p.add_argument("--pods", type=int, default=1)
    p.add_argument("--rates", default="1gbit,200mbit")
    p.add_argument("--launch", default="random")
    p.add_argument("--seed", type=int, default=4)
    p.add_argument("--size", type=int, default=16, help="allreduce MB (2^20 bytes)")
    p.add_argument("--engine", default="mpi-default", help="testbed engine (mpi-default, mpi-ring)")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--prefix", default="rkv")
    p.add_argument("-o", "--output", default=None)
    args = p.parse_args(argv)

    shape = ["--racks", args.racks, "--rates", args.rates]
    if args.pods > 1:
        shape = ["--pods", str(args.pods), "--rates", args.rates]
    where = ["--prefix", args.prefix]
    _rankopt("testbed", "up", *where, *shape)
    try:
        with tempfile.TemporaryDirectory(prefix="rankopt-verify-") as d:
            rep_path = Path(d) / "report.json"
            _rankopt(
                "testbed", "-q", "run", "--attach", *where, "--launch", args.launch,
                "--seed", str(args.seed), "--engines", args.engine, "--sizes", f"{args.size}M",
                "--repeats", str(args.repeats), "--random", "0", "-o", str(rep_path),
            )  # fmt: skip
            rep = json.loads(rep_path.read_text())
            row = next(s for s in rep["summary"] if s["engine"] == args.engine)
            user = rep["user"][args.engine]["order"]
            n = len(user)
            files = {"user": Path(d) / "user.json", "launch": Path(d) / "launch.json"}
            files["user"].write_text(json.dumps(user))
            files["launch"].write_text(json.dumps(list(range(n))))
            mca = ["--ring"] if args.engine == "mpi-ring" else []
            got = {}
            for name, f in files.items():
                out = Path(d) / f"verify-{name}.json"
                _rankopt(
                    "testbed", "exec", "--attach", *where, "--hosts", args.launch,
                    "--seed", str(args.seed), *mca, "--", sys.executable, "-m", "rankopt",
                    "verify", "--order", str(f), "--sizes", f"{args.size}M",
                    "--repeats", str(2 * args.repeats), "--json", str(out),
                )  # fmt: skip
                got[name] = json.loads(out.read_text())
    finally:
        _rankopt("testbed", "down", *where)

    tb = row["launch"] / row["user_replay"]
    print(rep["describe"], f"launch {args.launch} seed {args.seed}, {args.engine} {args.size} MB")
    print(
        f"testbed run: launch {row['launch']:.3f} s, user path's order {row['user_replay']:.3f} s "
        f"(replayed in the timing job) -> {tb:.3f}x; the user path's own job "
        f"{row['user']:.3f} s -> {row['speedup_user']:.3f}x"
    )
    for name, v in got.items():
        print(
            f"verify --order {name}: speedup {v['speedup']:.3f}x "
            f"(90% interval {v['interval'][0]:.3f}-{v['interval'][1]:.3f}), "
            f"verdict {v['verdict']!r}"
        )
    ratio = got["user"]["speedup"] / tb
    print(f"verify / testbed (same order, same launch): {ratio:.3f} (target 0.90-1.10)")
    if args.output:
        Path(args.output).write_text(json.dumps({"testbed": row, "verify": got}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
