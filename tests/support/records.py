"""Counting the event records a scan builds (issue 16: a long stream is judged on the
events around its jumps and signals, never on a record per event)."""

from __future__ import annotations

import pytest

from sse_forensics.facts import model


def records_built(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Each :class:`~.model.EventRecord` of a stream of more than 1,000 events built from
    now on, by position (a short stream is read whole: ``facts.windows.WINDOWED_EVENTS``)."""
    built: list[int] = []
    post_init = model.EventRecord.__post_init__

    def counted(self: model.EventRecord) -> None:
        if self.stream.exchange.n_events > 1000:
            built.append(self.position)
        post_init(self)

    monkeypatch.setattr(model.EventRecord, "__post_init__", counted)
    return built
