"""Reading NSS key log files (``--tls-keylog``): the only code that opens them; the format
is parsed by :func:`sse_forensics.reassembly.tls.keylog.parse_keylog`."""

from __future__ import annotations

from sse_forensics.errors import ReadError, UnreadableInput
from sse_forensics.reassembly.tls.keylog import KeyLog, parse_keylog

# A key log holds ~100-300 bytes per session: this is millions of sessions.
MAX_KEYLOG_BYTES = 256 << 20


def read_keylogs(paths: list[str] | tuple[str, ...]) -> tuple[KeyLog, list[ReadError]]:
    """The secrets of every key log in ``paths``, and what in them could not be read (a bad
    line is an error value with its line number, never an exception). Raises
    :class:`UnreadableInput` for a file that cannot be opened or is too large."""
    keylog = KeyLog()
    errors: list[ReadError] = []
    for path in paths:
        try:
            with open(path, "rb") as fh:
                text = fh.read(MAX_KEYLOG_BYTES + 1)
        except OSError as exc:
            why = f"cannot read the TLS key log: {exc.strerror or exc}"
            raise UnreadableInput(path, why) from exc
        if len(text) > MAX_KEYLOG_BYTES:
            raise UnreadableInput(path, f"TLS key log larger than {MAX_KEYLOG_BYTES} bytes")
        log, problems, bad = parse_keylog(text)
        for problem in problems:
            errors.append(
                ReadError(path, f"TLS key log: {problem.what}; line ignored", line=problem.line)
            )
        if bad > len(problems):
            errors.append(ReadError(path, f"TLS key log: {bad - len(problems)} more lines ignored"))
        if not len(log) and not problems:
            errors.append(ReadError(path, "TLS key log holds no key"))
        keylog.update(log)
    return keylog, errors


__all__ = ["read_keylogs"]
