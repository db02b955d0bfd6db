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
    "_verify",
    "_check",
    "_testbed",
    "_shim",
    "_profile",
    "_run",
)


class CLIError(Exception):
    """An error reported as one line and exit status 1."""


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Every option's help ends with its default (units are in the help text)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if (
            "default" not in text
            and action.option_strings
            and action.default not in (None, False, argparse.SUPPRESS, [])
            and action.nargs != 0
        ):
            text += " (default: %(default)s)"
        return text


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rankopt",
        description="Rank reordering for collectives: measure, model, solve, apply.",
        formatter_class=HelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"rankopt {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks and debug logs")
    parser.add_argument("-q", "--quiet", action="store_true", help="print only results")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in _COMMANDS:
        importlib.import_module(f"rankopt.cli.{name}").register(sub)
    for cmd in _all_parsers(sub):
        cmd.formatter_class = HelpFormatter
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


def _all_parsers(sub: argparse._SubParsersAction) -> list[argparse.ArgumentParser]:
    """Every subcommand parser, nested ones (``testbed up``, ``shim build``) included."""
    out = []
    for cmd in sub.choices.values():
        out.append(cmd)
        for action in cmd._actions:
            if isinstance(action, argparse._SubParsersAction):
                out.extend(_all_parsers(action))
    return out


def cli_terms(message: str, parser: argparse.ArgumentParser | None) -> str:
    """A library message in the command line's words: ``nan='symmetric'`` -> ``--nan symmetric``.

    Only names that are options of ``parser`` are rewritten: ```uplink_bandwidth``` becomes
    ``--uplink-bandwidth``, ``name=value`` becomes ``--name value``; a hint to pass a
    setting the command has no option for (``Pass name='value' ...``) is left out.

    Examples
    --------
    >>> p = argparse.ArgumentParser()
    >>> _ = p.add_argument("--nan"); _ = p.add_argument("--uplink-bandwidth")
    >>> cli_terms("Pass nan='symmetric' to fill it.", p)
    'Pass --nan symmetric to fill it.'
    >>> cli_terms("`uplink_bandwidth` must be positive; `order` is bad", p)
    '--uplink-bandwidth must be positive; `order` is bad'
    >>> cli_terms("`latency` must be finite. Pass nan='symmetric' to fill it.", None)
    "`latency` must be finite. Pass nan='symmetric' to fill it."
    >>> cli_terms("`latency` must be finite. Pass nan='symmetric' to fill it.",
    ...           argparse.ArgumentParser())
    '`latency` must be finite.'
    """
    if parser is None:
        return message
    import re

    flags = {a.dest: max(a.option_strings, key=len) for a in parser._actions if a.option_strings}

    def assign(m: re.Match[str]) -> str:
        flag = flags.get(m.group(1))
        return f"{flag} {m.group(2)}" if flag else m.group(0)

    def name(m: re.Match[str]) -> str:
        return flags.get(m.group(1), m.group(0))

    def hint(m: re.Match[str]) -> str:
        return m.group(0) if m.group(1) in flags else ""

    message = re.sub(r"\s*Pass (\w+)='[^']*'[^.]*\.", hint, message)
    message = re.sub(r"\b(\w+)='([^']*)'", assign, message)
    return re.sub(r"`(\w+)`", lambda m: name(m) if m.group(1) in flags else m.group(0), message)


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
        sub = _subcommand_parser(parser, args.command)
        print(f"rankopt {args.command}: error: {cli_terms(one_line(exc), sub)}", file=sys.stderr)
        return 1


def _subcommand_parser(
    parser: argparse.ArgumentParser, name: str
) -> argparse.ArgumentParser | None:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action.choices.get(name)
    return None


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
