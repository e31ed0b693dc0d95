"""TCP sequence-number arithmetic (RFC 9293 §3.4): modulo 2**32, and "``a`` after ``b``"
when ``0 < a - b < 2**31``. One implementation for the reassembler (:mod:`.tcp`), the
window analysis (:mod:`.tcp_analysis`) and the columnar fast path (:mod:`.fast.tcp`):
:func:`seq_add` and :func:`seq_diff` take Python ints or numpy int64 arrays alike.
"""

from __future__ import annotations

from typing import TypeVar

import numpy as np

SEQ_MOD = 1 << 32
"""Sequence numbers are 32-bit and wrap (RFC 9293 §3.4)."""
SEQ_HALF = 1 << 31
"""How far apart two sequence numbers may be for their order to be known."""

Seq = TypeVar("Seq", int, np.ndarray)


def seq_add(seq: Seq, n: Seq | int) -> Seq:
    """``seq + n`` wrapped to 32 bits (``n`` may be negative)."""
    return (seq + n) % SEQ_MOD


def seq_diff(a: Seq, b: Seq | int) -> Seq:
    """``a - b`` as a signed distance in ``[-2**31, 2**31)``: how far ``a`` lies after
    ``b`` (negative: before)."""
    return ((a - b + SEQ_HALF) % SEQ_MOD) - SEQ_HALF


def seq_after(a: int, b: int) -> bool:
    """Sequence number ``a`` is after ``b`` (RFC 9293 §3.4)."""
    return 0 < (a - b) % SEQ_MOD < SEQ_HALF
