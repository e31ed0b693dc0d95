"""The typer application: the commands of this package under one ``sse-forensics``."""

from __future__ import annotations

from typing import Annotated

import typer

from sse_forensics import __version__
from sse_forensics.cli.common import EXIT_OK
from sse_forensics.cli.help import Command
from sse_forensics.cli.report import report
from sse_forensics.cli.rules import rules_app
from sse_forensics.cli.scan import scan
from sse_forensics.cli.timeline import timeline

app = typer.Typer(
    name="sse-forensics",
    help=(
        "Find lost Server-Sent Events in packet captures of MCP streamable-HTTP traffic and "
        "say, per session, whether each loss was signalled (expected_gap), silent "
        "(silent_corruption) or unknowable from the capture (indeterminate)."
    ),
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
)
app.command(cls=Command)(scan)
app.command(cls=Command)(timeline)
app.command(cls=Command)(report)
app.add_typer(rules_app, name="rules")


def _version(value: bool) -> None:
    if value:
        print(f"sse-forensics {__version__}")
        raise typer.Exit(EXIT_OK)


@app.callback()
def main_callback(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version.")
    ] = False,
) -> None:
    """sse-forensics: offline forensics for resumable SSE streams."""
