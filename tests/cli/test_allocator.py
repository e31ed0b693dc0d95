"""The command line asks polars' allocator to return freed pages at once (sse_forensics.memory,
POLARS_ALLOCATOR), before polars is loaded, and leaves a user's own setting alone."""

from __future__ import annotations

import os
import subprocess
import sys

from sse_forensics.memory import POLARS_ALLOCATOR

CODE = (
    "import os, sys\n"
    "from sse_forensics.cli import main\n"
    "sys.argv = ['sse-forensics', 'rules', 'list']\n"
    "try:\n    main()\nexcept SystemExit:\n    pass\n"
    "print('CONF=' + os.environ.get('_RJEM_MALLOC_CONF', ''))\n"
)


def _conf(env: dict[str, str]) -> str:
    proc = subprocess.run(
        [sys.executable, "-c", CODE], capture_output=True, text=True, env=env, check=True
    )
    return proc.stdout.rsplit("CONF=", 1)[1].strip()


def test_the_command_line_sets_the_allocator_before_polars() -> None:
    env = {k: v for k, v in os.environ.items() if k != "_RJEM_MALLOC_CONF"}
    # polars puts its own defaults first; the last setting of a key wins.
    assert _conf(env).endswith(POLARS_ALLOCATOR)


def test_a_users_allocator_setting_wins() -> None:
    env = {**os.environ, "_RJEM_MALLOC_CONF": "dirty_decay_ms:5000"}
    assert _conf(env).endswith(",dirty_decay_ms:5000")
    assert POLARS_ALLOCATOR not in _conf(env)
