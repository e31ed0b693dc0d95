"""Access-log format strings, compiled into a parsing plan.

Two dialects, as the servers document them:

- nginx ``log_format`` (ngx_http_log_module): ``$name`` or ``${name}`` variables between
  literal text. With the default ``escape=default`` nginx writes ``"``, ``\\`` and bytes
  outside printable ASCII as ``\\xHH``, so a logged value never holds a raw ``"``.
- Apache ``LogFormat`` (mod_log_config): ``%h``, ``%>s``, ``%{Header}i`` and so on. Apache
  escapes ``"`` and ``\\`` inside values as ``\\"`` and ``\\\\``.

A format is split at its literal ``"`` characters into *segments*; :mod:`.access` reads a
log with ``"`` as the column separator (no quoting), so every segment of every line lands
in its own column at CSV speed, and a value needs a regex only when its segment holds more
than one variable. ``-`` is the "no value" placeholder of both servers and reads as null.

Each variable maps to a column of the normalised ``access`` table (:mod:`.model`) or, when
it has no canonical meaning, to a key of ``extra`` under its own name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# How a variable's text becomes a value (see access.py ``_convert``).
STR = "str"
INT = "int"
SECONDS = "seconds"
MILLISECONDS = "milliseconds"
MICROSECONDS = "microseconds"
TIME_LOCAL = "time_local"  # nginx $time_local, CLF: 10/Oct/2000:13:55:36 -0700
TIME_CLF_BRACKETED = "time_clf_bracketed"  # Apache %t: [10/Oct/2000:13:55:36 -0700]
TIME_ISO8601 = "time_iso8601"  # nginx $time_iso8601: 2000-10-10T13:55:36-07:00
EPOCH = "epoch"  # nginx $msec: 1700000000.123
REQUEST_LINE = "request_line"  # "GET /mcp HTTP/1.1" → method, target, protocol

# nginx variable → (access column, conversion). Any other variable goes to ``extra``.
NGINX_VARIABLES: dict[str, tuple[str, str]] = {
    "remote_addr": ("client_ip", STR),
    "time_local": ("ts", TIME_LOCAL),
    "time_iso8601": ("ts", TIME_ISO8601),
    "msec": ("ts", EPOCH),
    "request": ("request", REQUEST_LINE),
    "request_method": ("method", STR),
    "request_uri": ("target", STR),
    "uri": ("target", STR),
    "server_protocol": ("protocol", STR),
    "status": ("status", INT),
    "body_bytes_sent": ("bytes_sent", INT),
    "bytes_sent": ("bytes_sent", INT),
    "request_time": ("request_time", SECONDS),
    "http_last_event_id": ("last_event_id", STR),
    "http_mcp_session_id": ("session_id", STR),
    "sent_http_mcp_session_id": ("sent_session_id", STR),
    # The header as the upstream (the MCP server) sent it, behind an nginx proxy.
    "upstream_http_mcp_session_id": ("sent_session_id", STR),
    "sent_http_content_type": ("content_type", STR),
    "http_user_agent": ("user_agent", STR),
}

# Request/response headers with a canonical column (names compared case-insensitively).
REQUEST_HEADERS = {
    "last-event-id": "last_event_id",
    "mcp-session-id": "session_id",
    "user-agent": "user_agent",
}
RESPONSE_HEADERS = {"mcp-session-id": "sent_session_id", "content-type": "content_type"}

# Apache directive letter → (access column or extra name, conversion). %i, %o, %t and %T
# depend on their {argument} and are handled in ``_apache_variable``.
APACHE_DIRECTIVES: dict[str, tuple[str, str]] = {
    "a": ("client_ip", STR),
    "h": ("client_ip", STR),
    "r": ("request", REQUEST_LINE),
    "s": ("status", INT),
    "b": ("bytes_sent", INT),  # CLF: "-" for no bytes
    "B": ("bytes_sent", INT),
    "O": ("bytes_sent", INT),
    "D": ("request_time", MICROSECONDS),
    "m": ("method", STR),
    "U": ("target", STR),
    "H": ("protocol", STR),
    "l": ("remote_logname", STR),
    "u": ("remote_user", STR),
    "A": ("local_ip", STR),
    "v": ("server_name", STR),
    "V": ("server_name", STR),
    "p": ("server_port", STR),
    "P": ("pid", STR),
    "q": ("query", STR),
    "f": ("filename", STR),
    "k": ("keepalive_requests", STR),
    "L": ("log_id", STR),
    "R": ("handler", STR),
    "X": ("connection_status", STR),
    "I": ("bytes_received", STR),
    "S": ("bytes_transferred", STR),
    "e": ("env", STR),
    "n": ("note", STR),
    "C": ("cookie", STR),
}

PRESETS: dict[str, str] = {
    "common": 'nginx:$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent',
    "combined": 'nginx:$remote_addr - $remote_user [$time_local] "$request" $status '
    '$body_bytes_sent "$http_referer" "$http_user_agent"',
    "mcp": 'nginx:$remote_addr - $remote_user [$time_local] "$request" $status '
    '$body_bytes_sent "$http_referer" "$http_user_agent" "$http_last_event_id" '
    '"$http_mcp_session_id" "$sent_http_mcp_session_id" $request_time',
    "combined-mcp": 'nginx:$remote_addr - $remote_user [$time_local] "$request" $status '
    '$body_bytes_sent "$http_referer" "$http_user_agent" "$http_last_event_id" '
    '"$sent_http_mcp_session_id" $request_time',
    "apache-mcp": 'apache:%h %l %u %t "%r" %>s %b "%{Last-Event-ID}i" "%{Mcp-Session-Id}i" '
    '"%{Mcp-Session-Id}o"',
}
"""Named formats. ``combined`` and ``common`` are nginx's and Apache's (the same lines);
``mcp`` is ``combined`` plus the MCP headers and ``$request_time``; ``combined-mcp`` is
``combined`` plus ``Last-Event-ID``, the session header the server sent (many send it on
every response) and ``$request_time``; ``apache-mcp`` is the Apache example of
docs/logs.md."""

SNIFF_ORDER = ("mcp", "combined-mcp", "apache-mcp", "combined", "common")
"""Presets tried, most specific first, when a text log comes without a format."""


@dataclass(frozen=True, slots=True)
class Variable:
    """One ``$var`` / ``%x`` of a format: ``shown`` as the user wrote it, the ``column`` it
    fills (an access column, ``request``, or an ``extra`` key) and how to convert it."""

    shown: str
    column: str
    convert: str
    pattern: str | None = None  # its regex when "up to the next separator" is not enough

    @property
    def shape(self) -> str | None:
        """The regex a value must match, when its conversion or syntax fixes one."""
        return self.pattern if self.pattern is not None else _SHAPES.get(self.convert)


_NUMBER = r"\d+(?:\.\d*)?"
_SHAPES = {
    INT: r"-|\d+",
    SECONDS: f"-|{_NUMBER}",
    MILLISECONDS: f"-|{_NUMBER}",
    MICROSECONDS: f"-|{_NUMBER}",
    EPOCH: f"-|{_NUMBER}",
}


# Spaces inside a value of these conversions: CLF time "10/Oct/2000:13:55:36 -0700".
_SPACES = {TIME_LOCAL: 1, TIME_CLF_BRACKETED: 1}


@dataclass(frozen=True, slots=True)
class Word:
    """Part of a segment between spaces: a variable (or None: literal only) with literal
    ``prefix``/``suffix`` (``[``, ``]``), spanning ``count`` space-separated words."""

    variable: Variable | None
    prefix: str
    suffix: str
    count: int


@dataclass(frozen=True, slots=True)
class Segment:
    """The part of a line between two ``"``: literal text and variables."""

    tokens: tuple[str | Variable, ...]

    @property
    def variables(self) -> tuple[Variable, ...]:
        return tuple(t for t in self.tokens if isinstance(t, Variable))

    @property
    def direct(self) -> bool:
        """The whole segment is one variable's value (no regex needed)."""
        return len(self.tokens) == 1 and isinstance(self.tokens[0], Variable)

    def words(self) -> tuple[Word, ...] | None:
        """The segment as space-separated words, when a split at spaces finds every
        variable at a fixed place (``$remote_addr - $remote_user [$time_local] ``): a
        plain ``splitn`` then replaces the regex. None when a literal holds something
        other than spaces around a single variable, or a variable's spaces are unknown."""
        words: list[Word] = []
        prefix, var, suffix = "", None, ""
        for token in self.tokens:
            if isinstance(token, Variable):
                if var is not None or (token.pattern and token.convert not in _SPACES):
                    return None
                var = token
                continue
            pieces = token.split(" ")
            for k, piece in enumerate(pieces):
                if k:
                    spaces = _SPACES.get(var.convert, 0) if var is not None else 0
                    words.append(Word(var, prefix, suffix, 1 + spaces))
                    prefix, var, suffix = "", None, ""
                if var is None:
                    prefix += piece
                else:
                    suffix += piece
        spaces = _SPACES.get(var.convert, 0) if var is not None else 0
        words.append(Word(var, prefix, suffix, 1 + spaces))
        return tuple(words)

    def regex(self, *, last_in_line: bool, named: bool = True) -> str:
        """An anchored regex with one group per variable (``g0``, ``g1``, …; unnamed when
        not ``named``): a variable takes everything up to the first character of the
        literal after it. Written in the syntax Python ``re`` and Rust ``regex`` share."""
        parts = ["^"]
        group = 0
        for i, token in enumerate(self.tokens):
            if isinstance(token, str):
                parts.append(_escape(token))
                continue
            following = self.tokens[i + 1] if i + 1 < len(self.tokens) else None
            if isinstance(following, Variable) and token.pattern is None:
                raise ValueError(
                    f"cannot tell {token.shown} from {following.shown}: the format has no "
                    "separator between them"
                )
            if token.shape is not None:
                body = token.shape
            elif isinstance(following, str):
                body = f"[^{_escape_in_class(following[0])}]*"
            elif following is None:
                body = ".*" if last_in_line else '[^"]*'
            else:
                raise ValueError(
                    f"cannot tell {token.shown} from {following.shown}: the format has no "
                    "separator between them"
                )
            parts.append(f"(?P<g{group}>{body})" if named else f"(?:{body})")
            group += 1
        parts.append("$")
        return "".join(parts)


@dataclass(frozen=True, slots=True)
class AccessFormat:
    """A compiled access-log format: its segments between ``"`` and the variables in
    them. ``name`` is the preset name or the spec as given."""

    name: str
    dialect: str  # "nginx" | "apache"
    segments: tuple[Segment, ...]
    columns: tuple[str, ...] = field(default=())

    @property
    def time_is_start(self) -> bool:
        """Whether the logged time is when the request began (Apache ``%t``,
        ``%{sec}t``: "the time the request was received") rather than when the line was
        written, at the response's end (nginx ``$time_local``, ``$time_iso8601``,
        ``$msec``)."""
        return self.dialect == "apache"

    @property
    def quotes(self) -> int:
        """How many ``"`` a well-formed line holds."""
        return len(self.segments) - 1

    @property
    def variables(self) -> tuple[Variable, ...]:
        return tuple(v for s in self.segments for v in s.variables)

    def line_regex(self) -> str:
        """The whole-line regex (Python ``re`` and Rust ``regex`` alike)."""
        last = len(self.segments) - 1
        return '"'.join(
            s.regex(last_in_line=i == last, named=False)[1:-1] for i, s in enumerate(self.segments)
        ).join("^$")

    def explain(self, line: str) -> str:
        """Why ``line`` does not match: the first variable (or literal) where it stops."""
        if re.match(self.line_regex(), line):
            return "matches"
        tokens: list[str | Variable] = []
        for i, segment in enumerate(self.segments):
            if i:
                tokens.append('"')
            tokens.extend(segment.tokens)
        done = "^"
        for i, token in enumerate(tokens):
            piece = _escape(token) if isinstance(token, str) else _token_regex(tokens, i)
            if not re.match(done + piece, line):
                what = f"literal {token!r}" if isinstance(token, str) else token.shown
                at = _match_end(done, line)
                if at >= len(line):
                    return f"line ends before {what}"
                return f"no match at {what} (column {at + 1}: {line[at : at + 20]!r})"
            done += piece
        return "extra text after the last field"


def _token_regex(tokens: list[str | Variable], i: int) -> str:
    token = tokens[i]
    assert isinstance(token, Variable)
    if token.shape is not None:
        return f"(?:{token.shape})"
    following = tokens[i + 1] if i + 1 < len(tokens) else None
    if isinstance(following, str):
        return f"[^{_escape_in_class(following[0])}]*"
    return ".*"


_META = re.compile(r"([\\.+*?()|\[\]{}^$#&\-~])")


def _escape(literal: str) -> str:
    """Escape regex metacharacters only (``re.escape`` also escapes spaces, which Rust's
    ``regex`` rejects)."""
    return _META.sub(r"\\\1", literal)


def _escape_in_class(char: str) -> str:
    return "\\" + char if char in "\\]^-[" else char


def _match_end(regex: str, line: str) -> int:
    m = re.match(regex, line)
    return m.end() if m else 0


_NGINX_VAR = re.compile(r"\$(?:\{(\w+)\}|(\w+))")
_APACHE_DIRECTIVE = re.compile(r"%(?:!?\d+(?:,\d+)*)?([<>])?(?:\{([^}]*)\})?(.)")
_NGINX_PATTERNS = {
    # CLF time holds a space, so it is matched by shape rather than "up to the next space".
    "time_local": r"\d{1,2}/\w{3}/\d{4}:\d{2}:\d{2}:\d{2} [+-]\d{4}",
}


# How a variable named for a canonical column by a --log-map is converted, by its scale.
_NAMED_CONVERT: dict[str, dict[float | None, str]] = {
    "request_time": {None: SECONDS, 1.0: SECONDS, 1e-3: MILLISECONDS, 1e-6: MICROSECONDS},
    "ts": {None: EPOCH, 1.0: EPOCH, 1e-3: MILLISECONDS, 1e-6: MICROSECONDS},
    "start": {None: EPOCH, 1.0: EPOCH, 1e-3: MILLISECONDS, 1e-6: MICROSECONDS},
    "status": {None: INT},
    "bytes_sent": {None: INT},
}


@dataclass(frozen=True, slots=True)
class VariableName:
    """A ``--log-map`` ``[access]`` entry for a text log: the canonical ``column`` the
    variable ``name`` fills (``http_x_session``, ``$http_x_session`` or, Apache,
    ``%{X-Session}i``), and its ``scale`` (``0.001``: milliseconds)."""

    column: str
    name: str
    scale: float | None = None


def compile_format(
    spec: str, names: tuple[VariableName, ...] = (), *, strict: bool = True
) -> AccessFormat:
    """Compile ``'nginx:<log_format>'``, ``'apache:<LogFormat>'`` or a preset name; each
    of ``names`` makes its variable fill that canonical column (the one that filled it
    before keeps its value in ``extra``).

    Raises ``ValueError`` naming what could not be mapped: an unknown preset or dialect, an
    Apache directive this reader does not know, two variables with nothing between them,
    a format without any variable, or (``strict``) a name no variable of the format has.
    """
    spec = spec.strip()
    if spec in PRESETS:
        fmt = compile_format(PRESETS[spec], names, strict=strict)
        return AccessFormat(spec, fmt.dialect, fmt.segments, fmt.columns)
    dialect, sep, text = spec.partition(":")
    if not sep or dialect not in ("nginx", "apache"):
        raise ValueError(
            f"unknown log format {spec!r}: use a preset ({', '.join(PRESETS)}), "
            "'nginx:<log_format>' or 'apache:<LogFormat>'"
        )
    if dialect == "nginx":
        tokens = _nginx_tokens(_unquote_nginx(text))
    else:
        tokens = _apache_tokens(_unquote_apache(text))
    variables = [t for t in tokens if isinstance(t, Variable)]
    if not variables:
        raise ValueError(f"log format {spec!r} has no variables")
    tokens = _claim_columns(_named(tokens, names, strict))
    segments = _split_segments(tokens)
    last = len(segments) - 1
    for i, segment in enumerate(segments):
        if not segment.direct and segment.variables:
            segment.regex(last_in_line=i == last)  # raises on ambiguous neighbours
    columns = tuple(dict.fromkeys(v.column for v in variables))
    return AccessFormat(spec, dialect, segments, columns)


def _unquote_nginx(text: str) -> str:
    """A format pasted from nginx.conf may keep its quoting: ``'$a ' '"$b"'`` (nginx
    concatenates the quoted parts)."""
    text = text.strip().rstrip(";").strip()
    if text[:1] in ("'", '"') and text[-1:] == text[:1]:
        quote = text[0]
        parts = re.findall(rf"{quote}((?:[^{quote}\\]|\\.)*){quote}", text)
        if parts:
            return "".join(parts)
    return text


def _unquote_apache(text: str) -> str:
    """``LogFormat "%h \\"%r\\""`` as written in httpd.conf: drop the outer quotes and undo
    the ``\\"`` escapes."""
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] == '"':
        text = text[1:-1]
    return text.replace('\\"', '"').replace("\\\\", "\\")


def _nginx_tokens(text: str) -> list[str | Variable]:
    tokens: list[str | Variable] = []
    pos = 0
    for m in _NGINX_VAR.finditer(text):
        if m.start() > pos:
            tokens.append(text[pos : m.start()])
        name = m.group(1) or m.group(2)
        column, convert = NGINX_VARIABLES.get(name, (name, STR))
        tokens.append(Variable(m.group(0), column, convert, _NGINX_PATTERNS.get(name)))
        pos = m.end()
    if pos < len(text):
        tokens.append(text[pos:])
    return tokens


def _apache_tokens(text: str) -> list[str | Variable]:
    tokens: list[str | Variable] = []
    literal: list[str] = []
    pos = 0
    while pos < len(text):
        if text[pos] != "%":
            literal.append(text[pos])
            pos += 1
            continue
        m = _APACHE_DIRECTIVE.match(text, pos)
        if m is None:
            raise ValueError(f"Apache format: '%' at the end of {text!r}")
        pos = m.end()
        if m.group(3) == "%":
            literal.append("%")
            continue
        if literal:
            tokens.append("".join(literal))
            literal = []
        tokens.append(_apache_variable(m.group(0), m.group(2), m.group(3)))
    if literal:
        tokens.append("".join(literal))
    return tokens


def _apache_variable(shown: str, argument: str | None, letter: str) -> Variable:
    if letter == "i":
        name = (argument or "").lower()
        return Variable(shown, REQUEST_HEADERS.get(name, _header_key("http_", name)), STR)
    if letter == "o":
        name = (argument or "").lower()
        return Variable(shown, RESPONSE_HEADERS.get(name, _header_key("sent_http_", name)), STR)
    if letter == "t":
        if argument is None:
            return Variable(shown, "ts", TIME_CLF_BRACKETED, r"\[[^\]]*\]")
        if argument in ("sec", "msec_frac", "usec_frac"):
            # %{sec}t is an epoch; the fraction directives only make sense beside it.
            return Variable(shown, "ts" if argument == "sec" else argument, EPOCH, r"\d*")
        return Variable(shown, "time", STR)
    if letter == "T":
        unit = {None: SECONDS, "s": SECONDS, "ms": MILLISECONDS, "us": MICROSECONDS}
        if argument not in unit:
            raise ValueError(f"Apache format: unknown unit in {shown}")
        return Variable(shown, "request_time", unit[argument])
    if letter == "U":
        return Variable(shown, "target", STR, r'[^?\s"]*')
    if letter not in APACHE_DIRECTIVES:
        raise ValueError(f"Apache format: unknown directive {shown}")
    column, convert = APACHE_DIRECTIVES[letter]
    if argument and convert == STR and column not in ("client_ip", "method", "protocol"):
        column = f"{column}_{argument.lower()}"
    return Variable(shown, column, convert)


def _header_key(prefix: str, name: str) -> str:
    return prefix + re.sub(r"\W", "_", name)


def _is_called(var: Variable, name: str) -> bool:
    """Whether ``name`` (as a --log-map writes it) is ``var``: its name with or without
    ``$``/``${}``, its Apache directive, or the column it fills, in any case."""
    shown = var.shown
    bare = shown[2:-1] if shown.startswith("${") else shown.removeprefix("$")
    text = name.strip().lower()
    return text in {shown.lower(), bare.lower(), var.column.lower(), "$" + bare.lower()}


def _named(
    tokens: list[str | Variable], names: tuple[VariableName, ...], strict: bool
) -> list[str | Variable]:
    """``tokens`` with each variable a --log-map names filling its canonical column; a
    variable that filled that column before keeps its value in ``extra``. A name no
    variable has is an error when ``strict``, else skipped (it may be a JSON log's)."""
    if not names:
        return tokens
    out = list(tokens)
    renamed: set[int] = set()
    for name in names:
        hits = [
            i
            for i, t in enumerate(out)
            if isinstance(t, Variable) and i not in renamed and _is_called(t, name.name)
        ]
        if not hits:
            if not strict:
                continue
            raise ValueError(f"[access].{name.column}: the format has no variable {name.name!r}")
        converts = _NAMED_CONVERT.get(name.column, {None: STR})
        if name.scale not in converts:
            scales = [str(k) for k in converts if k is not None]
            raise ValueError(
                f"[access].{name.column}: scale {name.scale} is not one of "
                f"{', '.join(scales) or '(none: no scale for this column)'}"
            )
        for i in hits:
            var = out[i]
            assert isinstance(var, Variable)
            convert = converts[name.scale]
            pattern = var.pattern if convert == var.convert else None
            out[i] = Variable(var.shown, name.column, convert, pattern)
            renamed.add(i)
    taken = {v.column for i in renamed if isinstance(v := out[i], Variable)}  # all are
    for i, t in enumerate(out):
        if isinstance(t, Variable) and i not in renamed and t.column in taken:
            key = re.sub(r"\W+", "_", t.shown).strip("_")
            out[i] = Variable(t.shown, key, t.convert, t.pattern)
    return out


def _claim_columns(tokens: list[str | Variable]) -> list[str | Variable]:
    """The first variable for a canonical column wins; a later one (``$bytes_sent`` after
    ``$body_bytes_sent``) keeps its value under its own name in ``extra``."""
    seen: set[str] = set()
    out: list[str | Variable] = []
    for token in tokens:
        if isinstance(token, Variable):
            if token.column in seen:
                key = re.sub(r"\W+", "_", token.shown).strip("_")
                while key in seen:
                    key += "_"
                token = Variable(token.shown, key, STR, token.pattern)
            seen.add(token.column)
        out.append(token)
    return out


def _split_segments(tokens: list[str | Variable]) -> tuple[Segment, ...]:
    segments: list[Segment] = []
    current: list[str | Variable] = []
    for token in tokens:
        if isinstance(token, Variable):
            current.append(token)
            continue
        pieces = token.split('"')
        for j, piece in enumerate(pieces):
            if j:
                segments.append(Segment(tuple(current)))
                current = []
            if piece:
                current.append(piece)
    segments.append(Segment(tuple(current)))
    return tuple(segments)
