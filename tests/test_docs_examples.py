"""Every code example of the README and of the documentation, run as written.

The pages (``README.md`` and ``docs/**/*.md``) are read for fenced code
blocks; the first word of a fence's info string is its language, the words
after it say what to do with it:

```python                 run, in the page's namespace (blocks of a page build on each other)
```bash                   run with ``bash -euo pipefail`` in the page's folder
```LANG file=NAME         not run: its text is written to NAME in the page's folder
```LANG norun=REASON      not run (REASON: ci, cluster, slurm, kubernetes, root, gpu, bench,
                          package);
                          a bash block's rankopt command lines are still parsed by rankopt's
                          own argument parsers, a python block is compiled and its
                          ``from rankopt... import`` names are looked up
```text, ```json, ...     not code: output or a file format shown

Each page runs in a folder of its own, blocks in page order, so a block may use
a file an earlier block wrote. ``pip install .[extras] && CMD`` runs CMD after
checking that the extras exist in pyproject.toml (the package under test is
already installed). MPI examples are written for one machine
(``mpiexec -n 4 --oversubscribe``) and run when ``mpiexec`` is found; torchrun
examples run when torch is installed.
"""

from __future__ import annotations

import ast
import importlib
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"

RUN_LANGS = {"python", "bash"}
DATA_LANGS = {"text", "json", "yaml", "ini", "c", "toml", "csv", "cfg"}
NORUN_REASONS = {"ci", "cluster", "slurm", "kubernetes", "root", "gpu", "bench", "package"}
FENCE = re.compile(
    r"^(?P<indent>[ ]*)(?P<fence>`{3,})(?P<info>[^`\n]*)\n(?P<body>.*?)^(?P=indent)(?P=fence)[ ]*$",
    re.M | re.S,
)
PIP = re.compile(
    r"""^pip install (?:-e )?["']?\.(?:\[(?P<extras>[\w,-]+)\])?["']?"""
    r"""(?: && (?P<rest>[^#]*))?\s*(?:#.*)?$"""
)


@dataclass(frozen=True)
class Block:
    page: str
    line: int
    lang: str
    flags: dict[str, str]
    body: str

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"

    @property
    def action(self) -> str:
        if "file" in self.flags:
            return "file"
        if "norun" in self.flags:
            return "norun"
        return "run" if self.lang in RUN_LANGS else "data"


def pages() -> list[Path]:
    found = [REPO / "README.md"]
    found += sorted(p for p in DOCS.rglob("*.md") if "_build" not in p.parts)
    return found


def blocks(page: Path) -> list[Block]:
    text = page.read_text(encoding="utf-8")
    name = str(page.relative_to(REPO))
    out = []
    for m in FENCE.finditer(text):
        info = m.group("info").strip()
        if info.startswith("{"):  # a MyST directive (toctree, rankopt-help, ...)
            continue
        words = info.split()
        lang = words[0] if words else ""
        flags = {}
        for w in words[1:]:
            key, _, value = w.partition("=")
            flags[key] = value
        indent = len(m.group("indent"))
        body = "".join(line[indent:] + "\n" for line in m.group("body").splitlines())
        out.append(Block(name, text.count("\n", 0, m.start()) + 1, lang, flags, body))
    return out


ALL = [b for p in pages() for b in blocks(p)]


def _needs(page_blocks: list[Block]) -> set[str]:
    text = "\n".join(b.body for b in page_blocks if b.action in ("run", "file"))
    needs = set()
    if "mpiexec" in text or "mpi4py" in text:
        needs.add("mpi")
    if "torchrun" in text or "import torch" in text:
        needs.add("torch")
    return needs


def _page_params() -> list:
    params = []
    for page in pages():
        bs = blocks(page)
        if not any(b.action in ("run", "file") for b in bs):
            continue
        needs = _needs(bs)
        marks = [getattr(pytest.mark, n) for n in sorted(needs)]
        if needs:
            marks.append(pytest.mark.slow)
        params.append(pytest.param(page, marks=marks, id=str(page.relative_to(REPO))))
    return params


def _extras() -> set[str]:
    text = (REPO / "pyproject.toml").read_text()
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10: the table's keys, one per line
        table = text.split("[project.optional-dependencies]", 1)[1].split("\n[", 1)[0]
        return set(re.findall(r"^([\w-]+)\s*=", table, re.M))
    return set(tomllib.loads(text)["project"]["optional-dependencies"])


def _without_pip(block: Block) -> str:
    """The shell text with ``pip install .[extras] &&`` checked and dropped."""
    lines = []
    for line in block.body.splitlines():
        m = PIP.match(line.strip())
        if m is None:
            lines.append(line)
            continue
        wanted = set(filter(None, (m.group("extras") or "").split(",")))
        missing = wanted - _extras()
        assert not missing, f"{block.where}: extras {sorted(missing)} not in pyproject.toml"
        if m.group("rest"):
            lines.append(m.group("rest"))
    return "\n".join(lines) + "\n"


def _env(folder: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["RANKOPT_CACHE_DIR"] = str(folder / "cache")
    env.update(
        MPLBACKEND="Agg",
        OMPI_ALLOW_RUN_AS_ROOT="1",
        OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
        PYTHONUNBUFFERED="1",
    )
    return env


@pytest.mark.parametrize("page", _page_params())
def test_page_examples_run(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bs = blocks(page)
    needs = _needs(bs)
    if "mpi" in needs and shutil.which("mpiexec") is None:
        pytest.skip("mpiexec not found")
    if "torch" in needs:
        pytest.importorskip("torch")
    if page.name == "README.md":  # README commands name files of the clone: docs/examples/...
        (tmp_path / "docs").symlink_to(DOCS)
    env = _env(tmp_path)
    monkeypatch.chdir(tmp_path)
    for key in ("MPLBACKEND", "RANKOPT_CACHE_DIR"):
        monkeypatch.setenv(key, env[key])
    namespace: dict[str, object] = {"__name__": "__main__"}
    for b in bs:
        if b.action == "file":
            (tmp_path / b.flags["file"]).write_text(b.body)
        elif b.action == "run" and b.lang == "python":
            try:
                exec(compile(b.body, b.where, "exec"), namespace)
            except Exception as exc:  # reported with the block's place
                pytest.fail(f"{b.where}: the python example raised {exc!r}")
        elif b.action == "run":
            p = subprocess.run(
                ["bash", "-euo", "pipefail", "-c", _without_pip(b)],
                cwd=tmp_path,
                env=env,
                capture_output=True,
                text=True,
                timeout=600,
            )
            if p.returncode != 0:
                pytest.fail(
                    f"{b.where}: the bash example failed (exit {p.returncode})\n"
                    f"--- stdout\n{p.stdout[-3000:]}\n--- stderr\n{p.stderr[-3000:]}"
                )


# ------------------------------------------------------- what is not run


def _commands(text: str) -> list[list[str]]:
    """Shell command lines (continuations joined, comments dropped) as word lists."""
    joined = re.sub(r"\\\n\s*", " ", text)
    out = []
    for line in joined.splitlines():
        words = shlex.split(line, comments=True)
        cmd: list[str] = []
        for w in words + [";"]:
            if w in ("&&", "||", ";", "|"):
                if cmd:
                    out.append(cmd)
                cmd = []
            else:
                cmd.append(w)
    return out


def _rankopt_argv(cmd: list[str]) -> tuple[str, list[str]] | None:
    """The rankopt part of a command line: which parser, and its arguments."""
    for i, w in enumerate(cmd):
        if w == "rankopt":
            return "rankopt", cmd[i + 1 :]
        if w == "-m" and i + 1 < len(cmd) and cmd[i + 1].startswith("rankopt"):
            module = cmd[i + 1]
            rest = cmd[i + 2 :]
            if module == "rankopt.mpi":
                return "mpi", rest
            if module == "rankopt.run":
                return "rankopt", ["run", *rest]
            if module == "rankopt":
                return "rankopt", rest
    return None


def _parse(kind: str, argv: list[str]) -> None:
    if kind == "mpi":
        from rankopt.cli._mpi_main import build_parser, split_argv

        options, program = split_argv(argv)
        assert program, "python -m rankopt.mpi needs a program"
        build_parser().parse_args(options)
        return
    from rankopt.cli import build_parser

    build_parser().parse_args(argv)


NORUN = [b for b in ALL if b.action == "norun"]


@pytest.mark.parametrize("block", NORUN, ids=[b.where for b in NORUN])
def test_not_run_examples_are_checked(block: Block, capsys: pytest.CaptureFixture) -> None:
    assert block.flags["norun"] in NORUN_REASONS, (
        f"{block.where}: norun={block.flags['norun']!r}; say why with one of {sorted(NORUN_REASONS)}"
    )
    if block.lang == "python":
        tree = ast.parse(block.body, filename=block.where)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("rankopt"):
                mod = importlib.import_module(node.module)
                for alias in node.names:
                    assert hasattr(mod, alias.name), f"{block.where}: {node.module}.{alias.name}"
        return
    assert block.lang == "bash", f"{block.where}: norun blocks are python or bash"
    for cmd in _commands(block.body):
        found = _rankopt_argv(cmd)
        if found is None:
            continue
        try:
            _parse(*found)
        except SystemExit as exc:
            err = capsys.readouterr().err
            pytest.fail(f"{block.where}: `{shlex.join(cmd)}` does not parse ({exc.code}): {err}")


def test_every_block_has_a_known_kind() -> None:
    bad = [
        f"{b.where}: ```{b.lang}"
        for b in ALL
        if b.action in ("run", "data") and b.lang not in RUN_LANGS | DATA_LANGS
    ]
    assert not bad, "unknown code block languages (use python, bash or a data language):\n" + (
        "\n".join(bad)
    )


def test_readme_is_a_front_page() -> None:
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) <= 300
    ci = (REPO / ".ci" / "run").read_text().splitlines()
    (test_command,) = [c for c in ci if c.startswith("pip install") and "python -m pytest" in c]
    quick = [b.body.strip() for b in blocks(REPO / "README.md") if b.lang == "bash"]
    assert "pip install . && rankopt demo" in quick  # set-up and the main job
    assert test_command in quick  # set-up and the tests, as CI runs them


def test_inventory(capsys: pytest.CaptureFixture) -> None:
    """How many examples run, are written as files, are only checked; printed with -s."""
    counts: dict[str, int] = {}
    for b in ALL:
        counts[b.action] = counts.get(b.action, 0) + 1
    assert counts.get("run", 0) >= 40
    with capsys.disabled():
        print(
            f"\ndocs examples: {counts.get('run', 0)} run, {counts.get('file', 0)} files, "
            f"{counts.get('norun', 0)} checked but not run: "
            + ", ".join(f"{b.where} ({b.flags['norun']})" for b in NORUN)
        )
