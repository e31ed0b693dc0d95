"""The ``sse-forensics`` command run in this process (typer's CliRunner): a child process
costs ~0.7 s of CPU in imports alone. Tests of what only a real process shows (the
allocator set before polars loads, a pasted shell command, signals) keep ``subprocess``."""

from __future__ import annotations

import contextlib
import subprocess
from pathlib import Path

from typer.testing import CliRunner, Result


def invoke(*args: str, columns: int = 200) -> Result:
    """Run the command line in-process; a Python exception escaping it fails the test
    (a child process would have printed a traceback and exited 1)."""
    from sse_forensics.cli import app

    result = CliRunner().invoke(app, list(args), env={"COLUMNS": str(columns)})
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exc_info
    return result


def run(
    *args: str, columns: int = 200, cwd: Path | None = None
) -> subprocess.CompletedProcess[bytes]:
    """:func:`invoke` (in ``cwd`` if given), answered like ``subprocess.run(...,
    capture_output=True)``."""
    with contextlib.chdir(cwd) if cwd else contextlib.nullcontext():
        result = invoke(*args, columns=columns)
    return subprocess.CompletedProcess(
        ["sse-forensics", *args], result.exit_code, result.stdout_bytes, result.stderr_bytes
    )


def run_text(*args: str, columns: int = 200) -> subprocess.CompletedProcess[str]:
    """:func:`run` with ``text=True``."""
    result = invoke(*args, columns=columns)
    return subprocess.CompletedProcess(
        ["sse-forensics", *args], result.exit_code, result.stdout, result.stderr
    )
