"""Command line: ``scan`` (findings), ``timeline`` (what was reassembled), ``report``,
``rules``. Each command lives in its own module here; :mod:`.commands` assembles them.

This module stays light: ``sse-forensics --version`` answers without importing typer, rich
or polars, and each command imports the pipeline only when it runs.
"""

from __future__ import annotations

import sys
from typing import Any


def main() -> None:
    if sys.argv[1:] == ["--version"]:  # the common case, answered before any import
        from sse_forensics import __version__

        print(f"sse-forensics {__version__}")
        return
    from sse_forensics.memory import configure_polars_allocator

    configure_polars_allocator()  # before anything imports polars
    from sse_forensics.cli.commands import app

    try:
        app(prog_name="sse-forensics")
    except KeyboardInterrupt:
        sys.exit(130)


def __getattr__(name: str) -> Any:  # ``from sse_forensics.cli import app`` still works
    if name == "app":
        from sse_forensics.cli.commands import app

        return app
    raise AttributeError(name)
