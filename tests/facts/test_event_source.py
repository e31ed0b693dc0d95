"""A partition's events read back as records (facts/load.py ``EventSource``): the same
events, in position order, whether an exchange's rows sit in one run of the table (sliced)
or are scattered (gathered), and whether they were read ahead in one pass (``prefetch``)
or one exchange at a time."""

from __future__ import annotations

from typing import Any

import polars as pl

from sse_forensics.evidence.tables import EventColumns
from sse_forensics.facts.load import EventSource, prefetch_events
from sse_forensics.facts.model import ExchangeRecord

# (conn_id, ex_index, position) in table order: exchange (1, 0) in one ascending run,
# (2, 0) interleaved with (2, 1) and written out of position order.
_ROWS = [(1, 0, 0), (1, 0, 1), (1, 0, 2), (2, 1, 0), (2, 0, 1), (2, 1, 1), (2, 0, 0), (2, 0, 2)]


def _events() -> pl.DataFrame:
    columns: dict[str, list[Any]] = {name: [] for name in EventColumns.schema()}
    for n, (conn, ex, position) in enumerate(_ROWS):
        row = dict.fromkeys(columns)
        row.update(
            conn_id=conn,
            ex_index=ex,
            session="s",
            position=position,
            id=f"{conn}.{ex}.{position}",
            id_field=f"{conn}.{ex}.{position}",
            event="message",
            data="{}",
            start=n * 10,
            end=n * 10 + 9,
            dispatched=True,
            kind="data",
            first_src="log",
            first_num=n + 1,
            first_ts=float(n),
            first_kind="line",
            last_src="log",
            last_num=n + 1,
            last_ts=float(n),
            last_kind="line",
        )
        for name, values in columns.items():
            values.append(row[name])
    return EventColumns.frame(columns)


def _records(source: EventSource) -> list[ExchangeRecord]:
    out = []
    for conn, ex in ((1, 0), (2, 0), (2, 1)):
        record = ExchangeRecord(conn, ex, "s", "header", False, None, None, True)
        record.source = source
        out.append(record)
    return out


def _read(records: list[ExchangeRecord]) -> list[list[tuple[str | None, int, int | None]]]:
    return [[(e.id_field, e.start, e.origins[0].number) for e in r.events] for r in records]


def test_events_come_back_in_position_order_sliced_or_gathered() -> None:
    (contiguous, scattered, other) = _read(_records(EventSource(_events())))
    assert [i for i, _, _ in contiguous] == ["1.0.0", "1.0.1", "1.0.2"]
    assert scattered == [("2.0.0", 60, 7), ("2.0.1", 40, 5), ("2.0.2", 70, 8)]
    assert [i for i, _, _ in other] == ["2.1.0", "2.1.1"]


def test_prefetched_events_are_the_events_read_one_by_one() -> None:
    one_by_one = _read(_records(EventSource(_events())))
    source = EventSource(_events())
    records = _records(source)
    prefetch_events(records[:2])  # the third is read by itself when asked
    assert set(source._fetched) == {(1, 0), (2, 0)}
    assert _read(records) == one_by_one
    assert not source._fetched  # read-ahead rows are dropped once their records exist


def test_event_log_account_is_parsed_when_first_read() -> None:
    record = ExchangeRecord(1, 0, "s", "header", False, None, None, True)
    assert not record.has_log and record.log is None
    record.log_text = (
        '{"emitted": ["1", "2"], "evicted": {"2": ["events.jsonl", 7, 1.5, "line"]},'
        ' "evicted_why": {"2": "ttl"}, "stream": "st"}'
    )
    assert record.has_log
    log = record.log
    assert log is not None and log.emitted == ["1", "2"] and log.stream == "st"
    assert log.evicted["2"].number == 7 and record.log is log  # parsed once
    record.log = None
    assert not record.has_log and record.log is None
