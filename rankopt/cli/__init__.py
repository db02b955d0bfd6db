"""The ``rankopt`` command line.

Each subcommand lives in ``rankopt/cli/_<name>.py`` and exposes
``register(subparsers)``, which adds its parser and sets ``func=run`` with
``run(args) -> int``. Exit codes: 0 success, 1 error (one line on stderr,
the traceback only with ``--debug``), 2 usage error.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Sequence

from rankopt import __version__

__all__ = ["main", "CLIError", "build_parser"]

#: Subcommand modules, in the order they appear in ``rankopt --help``.
_COMMANDS: tuple[str, ...] = (
    "_demo",
    "_solve",
    "_compare",
    "_simulate",
    "_plot",
    "_probe",
    "_testbed",
    "_shim",
    "_run",
)


class CLIError(Exception):
    """An error reported as one line and exit status 1."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rankopt",
        description="Rank reordering for collectives: measure, model, solve, apply.",
    )
    parser.add_argument("--version", action="version", version=f"rankopt {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks and debug logs")
    parser.add_argument("-q", "--quiet", action="store_true", help="print only results")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in _COMMANDS:
        importlib.import_module(f"rankopt.cli.{name}").register(sub)
    for cmd in sub.choices.values():  # the global flags also work after the subcommand
        known = {a for action in cmd._actions for a in action.option_strings}
        if "--quiet" not in known:
            cmd.add_argument(
                "-q",
                "--quiet",
                action="store_true",
                default=argparse.SUPPRESS,
                help="print only results",
            )
        if "--debug" not in known:
            cmd.add_argument(
                "--debug",
                action="store_true",
                default=argparse.SUPPRESS,
                help="show tracebacks and debug logs",
            )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.debug else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    try:
        return int(args.func(args) or 0)
    except BrokenPipeError:  # the reader went away (`rankopt ... | head`): stop quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    except KeyboardInterrupt:
        print("rankopt: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - every failure is one line (--debug: traceback)
        if args.debug:
            raise
        print(f"rankopt {args.command}: error: {one_line(exc)}", file=sys.stderr)
        return 1


def one_line(exc: BaseException) -> str:
    """The first line of an exception's message; its class name when the message is empty.

    Exceptions other than rankopt's own and the usual input errors carry their
    class name, so a user can tell a missing module from a bad argument.

    Examples
    --------
    >>> one_line(ValueError("bad value\\nmore detail"))
    'bad value'
    >>> one_line(ModuleNotFoundError("No module named 'matplotlib'"))
    "ModuleNotFoundError: No module named 'matplotlib'"
    >>> one_line(KeyError())
    'KeyError'
    """
    text = str(exc).strip()
    if not text:
        return type(exc).__name__
    first = text.splitlines()[0]
    if isinstance(exc, (CLIError, ValueError, OSError, TypeError, RuntimeError)) and not isinstance(
        exc, ImportError
    ):
        return first
    return f"{type(exc).__name__}: {first}"
