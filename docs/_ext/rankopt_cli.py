"""``rankopt-help``: the help text of a rankopt command, taken from its parser.

Usage in a page (MyST)::

    ```{rankopt-help} solve
    ```

The argument is a subcommand (``solve``, ``testbed run``), nothing for
``rankopt`` itself, or ``python -m rankopt.mpi``. The text is what
``--help`` prints at 88 columns, so the reference never drifts from the code.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from docutils import nodes
from sphinx.util.docutils import SphinxDirective

WIDTH = "88"


def _parser(words: list[str]) -> argparse.ArgumentParser:
    if words[:3] == ["python", "-m", "rankopt.mpi"]:
        from rankopt.cli._mpi_main import build_parser as build_mpi

        return build_mpi()
    from rankopt.cli import build_parser

    parser = build_parser()
    for word in words:
        sub = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
        if sub is None or word not in sub.choices:
            raise ValueError(f"no rankopt command {' '.join(words)!r}")
        parser = sub.choices[word]
    return parser


def help_text(command: str) -> str:
    """What ``rankopt COMMAND --help`` prints at :data:`WIDTH` columns."""
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = WIDTH
    try:
        return _parser(command.split()).format_help()
    finally:
        if old is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = old


class RankoptHelp(SphinxDirective):
    optional_arguments = 1
    final_argument_whitespace = True
    has_content = False

    def run(self) -> list[nodes.Node]:
        command = self.arguments[0] if self.arguments else ""
        try:
            text = help_text(command)
        except ValueError as exc:
            raise self.error(str(exc)) from exc
        block = nodes.literal_block(text, text)
        block["language"] = "text"
        return [block]


def setup(app: Any) -> dict[str, Any]:
    app.add_directive("rankopt-help", RankoptHelp)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
