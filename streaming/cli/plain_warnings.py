"""Python warnings raised while a command runs, shown as plain lines of the command's output
(`streaming plan: warning: ...`) instead of Python's form with a source path, line number and
warning class, which speaks to the library's developers rather than to its user."""

from __future__ import annotations

import contextlib
import sys
import warnings
from collections.abc import Iterator
from typing import TextIO


@contextlib.contextmanager
def plain_warnings(command: str, *, verbose: bool = False) -> Iterator[None]:
    """Show each warning raised inside the block as `streaming COMMAND: warning: MESSAGE` on
    stderr, each message once (Python's filters still decide which are shown; they tell two
    places that raise one message apart); with `verbose`, in Python's form.

    Args:
        command: the subcommand's name.
        verbose: keep Python's own form (file, line and class), for a bug report.
    """
    if verbose:
        yield
        return
    previous = warnings.showwarning
    shown: set[str] = set()

    def show(message: Warning | str, category: type[Warning], filename: str, lineno: int,
             file: TextIO | None = None, line: str | None = None) -> None:
        text = str(message)
        if text not in shown:
            shown.add(text)
            print(f"streaming {command}: warning: {text}", file=file or sys.stderr)

    warnings.showwarning = show
    try:
        yield
    finally:
        warnings.showwarning = previous
