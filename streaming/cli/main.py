"""Entry point: one argparse subcommand per module; user errors print one line and exit 2."""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence

from streaming.cli._common import CommandFailed, UserError
from streaming.cli.plain_warnings import plain_warnings
from streaming.errors import StreamingError

# Subcommand name -> module under streaming.cli (each has register(subparsers)).
COMMANDS = {
    "convert": "convert",
    "inspect": "inspect",
    "validate": "validate",
    "merge-index": "merge",
    "lengths": "add_lengths",
    "cache": "cache",
    "plan": "plan",
    "upload": "upload_folder",
    "parquet-index": "parquet_publish",
}

# Exceptions that mean "the input or arguments are wrong", reported without a traceback.
_USER_ERRORS = (UserError, ValueError, FileNotFoundError, FileExistsError, PermissionError,
                NotADirectoryError, IsADirectoryError, ImportError)
# Failures while running (a dead worker, a storage outage): one line, exit code 1.
_RUN_ERRORS = (StreamingError, OSError)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="streaming",
        description="Create, inspect and check MDS datasets.",
        epilog="Run 'streaming COMMAND --help' for a command's options and examples.",
    )
    parser.add_argument("--verbose", "-v", action="store_true", help="log progress details")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in COMMANDS.values():
        importlib.import_module(f"streaming.cli.{module}").register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the process exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        with plain_warnings(args.command, verbose=args.verbose):
            return int(args.run(args) or 0)
    except CommandFailed as exc:
        print(f"streaming {args.command}: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # output piped into `head` and the like: not an error
        sys.stderr.close()
        return 141
    except KeyboardInterrupt:
        print(f"streaming {args.command}: interrupted", file=sys.stderr)
        return 130
    except _USER_ERRORS as exc:
        return _report(args, exc, 2)
    except _RUN_ERRORS as exc:
        return _report(args, exc, 1)


def _report(args: argparse.Namespace, exc: BaseException, code: int) -> int:
    if args.verbose:
        raise exc
    message = str(exc) or type(exc).__name__
    print(f"streaming {args.command}: error: {message}", file=sys.stderr)
    return code


if __name__ == "__main__":  # `python -m streaming.cli.main ...`, as `python -m streaming.cli`
    raise SystemExit(main())
