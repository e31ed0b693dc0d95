"""One plot per affected session for the HTML report: event ID (y) against capture time (x),
one trace per response (original, resumed), dropped ID ranges shaded by verdict, and
markers for resumes, ``410``s, signals, FIN/RST disconnects, missing capture bytes and
zero-window periods.

Plotly reads every text it draws as a small HTML subset and decodes entities, so each
captured string is passed through :func:`plot_text` (control characters escaped, then HTML
escaped): a ``<script>`` in an event ID shows as those characters, never as markup.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import plotly.graph_objects as go

from sse_forensics.report.escape import printable
from sse_forensics.report.ladder import gap_label, zero_window_periods
from sse_forensics.verdicts import (
    CONTRACT_VIOLATION,
    EXPECTED_GAP,
    INDETERMINATE,
    SILENT_CORRUPTION,
)

if TYPE_CHECKING:
    from sse_forensics.facts.gaps import GapRecord
    from sse_forensics.facts.model import EventRecord, StreamRecord
    from sse_forensics.reassembly.flows import Connection

VERDICT_COLOUR = {
    SILENT_CORRUPTION: "#c0392b",
    INDETERMINATE: "#8e44ad",
    CONTRACT_VIOLATION: "#2e86c1",
    EXPECTED_GAP: "#d4a017",
}
MISSING_BYTES_COLOUR = "#7f8c8d"
ZERO_WINDOW_COLOUR = "#3498db"
PLOT_HEIGHT_PX = 440


def plot_text(value: object, limit: int = 120) -> str:
    """A captured string made safe for Plotly's HTML-subset text rendering."""
    return html.escape(printable(value, limit), quote=True)


def utc(ts: float | None) -> str:
    if ts is None:
        return ""
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


@dataclass(slots=True)
class _Axis:
    """Where an event ID sits on the y axis: its counter where the scheme has one (int,
    prefixed), else its position in the order the IDs were first observed (opaque)."""

    arithmetic: bool
    positions: dict[str, int] = field(default_factory=dict)

    def observe(self, e: EventRecord) -> None:
        id_field = e.sse.id_field
        if e.carries_id and id_field is not None and id_field not in self.positions:
            self.positions[id_field] = len(self.positions)

    def y(self, event_id: str | None, e: EventRecord | None = None) -> int | None:
        if self.arithmetic and e is not None and e.key is not None:
            return e.key.seq
        if event_id is None:
            return None
        return self.positions.get(event_id)

    def gap_range(self, g: GapRecord) -> tuple[int, int] | None:
        if self.arithmetic:
            if g.keys is None or g.keys.first is None:
                return None
            return g.keys.first, g.keys.last if g.keys.last is not None else g.keys.first
        named = g.missing_ids or [i for i in (g.first, g.last) if i is not None]
        ys = [self.positions[i] for i in named if i in self.positions]
        return (min(ys), max(ys)) if ys else None


def _stream_name(s: StreamRecord) -> str:
    req = s.exchange.request
    what = f"{req.method} {req.target}" if req is not None else "(request not captured)"
    role = (
        f"resume, Last-Event-ID {printable(s.last_event_id, 40)}"
        if s.kind == "resume"
        else "original"
    )
    return plot_text(f"conn {s.connection.id}: {printable(what, 60)} ({role})", 140)


def _event_hover(e: EventRecord, rel: float) -> list[str]:
    o = e.origin
    frame = f"{plot_text(o.source, 80)} frame {o.number}" if o is not None else "?"
    return [
        plot_text(e.sse.id_field, 60),
        plot_text(e.sse.event, 40),
        frame,
        f"{utc(o.ts if o else None)} (+{rel:.3f}s)",
    ]


class SessionPlot:
    """Builds the figure for one session's streams and gaps."""

    def __init__(
        self, streams: list[StreamRecord], gaps: list[GapRecord], connections: list[Connection]
    ) -> None:
        self.streams = sorted(streams, key=lambda s: s.first_ts)
        self.gaps = gaps
        self.connections = connections
        scheme = self.streams[0].session.id_scheme if self.streams else "opaque"
        self.axis = _Axis(arithmetic=scheme in ("int", "prefixed"))
        self.t0 = min((s.first_ts for s in self.streams), default=0.0)
        self.fig = go.Figure()
        self.points: list[tuple[float, int]] = []  # (ts, y) of every plotted event
        self.markers: dict[str, dict[str, list]] = {}

    def x(self, ts: float | None) -> float | None:
        return None if ts is None else round(ts - self.t0, 6)

    def _y_before(self, ts: float, conn: int | None = None) -> int:
        """The y of the last event plotted at or before ``ts``, for markers with no ID."""
        ys = [y for t, y in self.points if t <= ts]
        if ys:
            return ys[-1]
        return min((y for _t, y in self.points), default=0)

    def _mark(self, kind: str, ts: float | None, y: int | None, hover: str) -> None:
        if ts is None or y is None:
            return
        m = self.markers.setdefault(kind, {"x": [], "y": [], "text": []})
        m["x"].append(self.x(ts))
        m["y"].append(y)
        m["text"].append(hover)

    def build(self) -> go.Figure:
        for s in self.streams:
            for e in s.events:
                if e.kind != "signal":
                    self.axis.observe(e)
        for s in self.streams:
            self._stream_trace(s)
        self.points.sort()
        for s in self.streams:
            self._resume_marks(s)
            self._signal_marks(s)
            self._hole_marks(s)
        for g in self.gaps:
            self._gap_band(g)
        for conn in self.connections:
            self._connection_marks(conn)
        self._marker_traces()
        self._layout()
        return self.fig

    def _stream_trace(self, s: StreamRecord) -> None:
        xs, ys, hover = [], [], []
        for e in s.events:
            o = e.origin
            y = self.axis.y(e.sse.id_field, e)
            if e.kind == "signal" or not e.carries_id or o is None or y is None:
                continue
            xs.append(self.x(o.ts))
            ys.append(y)
            hover.append(_event_hover(e, o.ts - self.t0))
            self.points.append((o.ts, y))
        if not xs:
            return
        self.fig.add_trace(
            go.Scatter(
                x=xs,
                y=ys,
                mode="lines+markers",
                name=_stream_name(s),
                customdata=hover,
                hovertemplate=(
                    "id %{customdata[0]} (%{customdata[1]})<br>%{customdata[2]}"
                    "<br>%{customdata[3]}<extra></extra>"
                ),
                marker={"size": 6},
                line={"width": 1, "shape": "hv"},
            )
        )

    def _resume_marks(self, s: StreamRecord) -> None:
        if s.kind != "resume":
            return
        req = s.request_origin
        ts = req.ts if req is not None else s.first_ts
        y = self.axis.y(s.last_event_id, s.resumed_event)
        if y is None:
            y = self._y_before(ts)
        leid = plot_text(s.last_event_id, 60)
        self._mark("resume", ts, y, f"resume on conn {s.connection.id}, Last-Event-ID {leid}")
        self.fig.add_vline(x=self.x(ts), line={"dash": "dot", "width": 1, "color": "#555"})
        if s.status == 410:
            resp = s.response_origin
            at = resp.ts if resp is not None else ts
            self._mark("410", at, y, f"410 Gone on conn {s.connection.id}: {leid} not retained")

    def _signal_marks(self, s: StreamRecord) -> None:
        for e in s.events:
            if e.kind != "signal" or e.origin is None:
                continue
            ts = e.origin.ts
            hover = f"{plot_text(e.sse.event, 40)} {plot_text(e.sse.data, 120)}"
            self._mark("signal", ts, self._y_before(ts), hover)

    def _hole_marks(self, s: StreamRecord) -> None:
        for hole in s.exchange.holes:
            start = hole.span.after or hole.span.before
            end = hole.span.before or hole.span.after
            if start is None or end is None:
                continue
            x0, x1 = self.x(start.ts), self.x(end.ts)
            self.fig.add_vrect(
                x0=x0, x1=x1, fillcolor=MISSING_BYTES_COLOUR, opacity=0.25, line_width=0
            )
            self._mark(
                "missing", start.ts, self._y_before(start.ts), plot_text(hole.span.describe())
            )

    def _gap_band(self, g: GapRecord) -> None:
        colour = VERDICT_COLOUR.get(g.verdict, "#999")
        where = g.after or g.signal_event
        ts = where.origin.ts if where is not None and where.origin is not None else None
        if ts is None and g.stream.response_origin is not None:
            ts = g.stream.response_origin.ts
        span = self.axis.gap_range(g)
        y: int | None
        if span is not None:
            lo, hi = span
            self.fig.add_hrect(
                y0=lo - 0.5, y1=hi + 0.5, fillcolor=colour, opacity=0.22, line_width=0
            )
            y = (lo + hi) // 2
        else:
            y = self._y_before(ts) + 1 if ts is not None else None
        self._mark(g.verdict, ts, y, plot_text(gap_label(g), 300))

    def _connection_marks(self, conn: Connection) -> None:
        for side, origin in conn.fin.items():
            hover = f"FIN from {side}, conn {conn.id}, frame {origin.number}"
            self._mark("disconnect", origin.ts, self._y_before(origin.ts), hover)
        if conn.rst is not None:
            hover = f"RST from {conn.rst_by or '?'}, conn {conn.id}, frame {conn.rst.number}"
            self._mark("disconnect", conn.rst.ts, self._y_before(conn.rst.ts), hover)
        for z in zero_window_periods(conn):
            end = z.end.ts if z.end is not None else z.start.ts
            self.fig.add_vrect(
                x0=self.x(z.start.ts),
                x1=self.x(end),
                fillcolor=ZERO_WINDOW_COLOUR,
                opacity=0.2,
                line_width=0,
            )
            hover = f"zero window ({z.direction} side), conn {conn.id}"
            self._mark("zero-window", z.start.ts, self._y_before(z.start.ts), hover)

    def _marker_traces(self) -> None:
        styles = {
            SILENT_CORRUPTION: (
                "dropped: silent_corruption",
                "x",
                VERDICT_COLOUR[SILENT_CORRUPTION],
                14,
            ),
            INDETERMINATE: ("dropped: indeterminate", "x", VERDICT_COLOUR[INDETERMINATE], 14),
            EXPECTED_GAP: ("dropped: expected_gap", "x", VERDICT_COLOUR[EXPECTED_GAP], 14),
            "resume": ("resume (Last-Event-ID)", "triangle-right", "#2c3e50", 12),
            "410": ("410 Gone", "square-x-open", "#c0392b", 14),
            "signal": ("gap signal", "star", "#16a085", 13),
            "disconnect": ("FIN / RST", "line-ns-open", "#34495e", 14),
            "missing": ("missing capture bytes", "diamond-open", MISSING_BYTES_COLOUR, 12),
            "zero-window": ("zero window", "hourglass", ZERO_WINDOW_COLOUR, 12),
        }
        for kind, (name, symbol, colour, size) in styles.items():
            m = self.markers.get(kind)
            if not m:
                continue
            self.fig.add_trace(
                go.Scatter(
                    x=m["x"],
                    y=m["y"],
                    mode="markers",
                    name=name,
                    text=m["text"],
                    hovertemplate="%{text}<extra></extra>",
                    marker={"symbol": symbol, "color": colour, "size": size, "line": {"width": 2}},
                )
            )

    def _layout(self) -> None:
        ytitle = "event ID (counter)" if self.axis.arithmetic else "event ID (order first observed)"
        self.fig.update_layout(
            height=PLOT_HEIGHT_PX,
            margin={"l": 60, "r": 20, "t": 30, "b": 40},
            xaxis={"title": {"text": f"seconds since {utc(self.t0)}"}, "zeroline": False},
            yaxis={"title": {"text": ytitle}, "zeroline": False},
            legend={"orientation": "h", "yanchor": "top", "y": -0.18, "x": 0},
            hovermode="closest",
            template="plotly_white",
        )


def session_figure(
    streams: list[StreamRecord], gaps: list[GapRecord], connections: list[Connection]
) -> dict:
    """The Plotly figure (``data``/``layout`` JSON) for one session."""
    return SessionPlot(streams, gaps, connections).build().to_plotly_json()
