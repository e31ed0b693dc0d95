"""``sse-forensics rules list|show``."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from sse_forensics.cli.common import usage_error
from sse_forensics.cli.help import Command

if TYPE_CHECKING:
    from rich.console import Console

    from sse_forensics.engine.rule import Rule

rules_app = typer.Typer(help="List the detection rules and explain one.", no_args_is_help=True)
# Below this width the table's title column gets too narrow to read: one rule per two lines.
WIDE_RULES_TABLE = 120
ExtraRules = Annotated[
    list[Path] | None, typer.Option("--rules", metavar="DIR", help="Extra rule directory.")
]


def _verdict(rule: Rule) -> str:
    return rule.classification or f"from {rule.classification_from}"


def print_rules_table(console: Console, rules: list[Rule]) -> None:
    """One row per rule: id, severity, verdict, fact table, title."""
    from rich import box
    from rich.table import Table

    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, header_style="bold")
    for column in ("id", "severity", "verdict", "table"):
        table.add_column(column, no_wrap=True)
    table.add_column("title", ratio=1)
    for r in rules:
        table.add_row(r.id, r.severity, _verdict(r), r.table, r.title)
    console.print(table)


def print_rules_compact(console: Console, rules: list[Rule]) -> None:
    """Two lines per rule for a narrow terminal: id, severity and verdict, then the title
    and fact table, indented and wrapped."""
    from rich.text import Text

    width = max((len(r.id) for r in rules), default=0)
    for r in rules:
        head = Text(f"{r.id:<{width}}", style="bold")
        head.append(f"  {r.severity:<8}  {_verdict(r)}")
        console.print(head, overflow="fold")
        title = textwrap.fill(
            f"{r.title} ({r.table})", console.width, initial_indent="    ", subsequent_indent="    "
        )
        console.print(Text(title, style="dim"), soft_wrap=True)


@rules_app.command("list", cls=Command)
def rules_list(rules: ExtraRules = None) -> None:
    """List every rule with its severity and what it detects."""
    from rich.console import Console
    from rich.text import Text

    from sse_forensics.engine.registry import load_rules

    ruleset = load_rules(rules)
    console = Console(highlight=False)
    if console.width >= WIDE_RULES_TABLE:
        print_rules_table(console, ruleset.rules)
    else:
        print_rules_compact(console, ruleset.rules)
    for msg in ruleset.errors:
        console.print(Text(f"rule not loaded: {msg}", style="red"))


@rules_app.command("show", cls=Command)
def rules_show(
    rule_id: Annotated[
        str, typer.Argument(metavar="RULE_ID", help="Rule id, e.g. missing-stream-gap.")
    ],
    rules: ExtraRules = None,
) -> None:
    """Print a rule's rationale, remediation, example and predicate."""
    from rich.console import Console
    from rich.markdown import Markdown

    from sse_forensics.engine.registry import load_rules

    ruleset = load_rules(rules)
    rule = ruleset.get(rule_id)
    if rule is None:
        usage_error(f"no rule {rule_id!r}; `sse-forensics rules list` shows them")
    verdict = rule.classification or f"from column `{rule.classification_from}`"
    text = (
        f"# {rule.id}: {rule.title}\n\n"
        f"**Severity:** {rule.severity} · **Verdict:** {verdict} · **Table:** `{rule.table}`\n\n"
        f"**Predicate:** `{rule.where}`\n\n## Rationale\n\n{rule.rationale}\n\n"
        f"## Remediation\n\n{rule.remediation}\n\n"
    )
    if rule.example:
        text += f"## Example\n\n```\n{rule.example}\n```\n\n"
    if rule.references:
        text += "## References\n\n" + "\n".join(f"- {r}" for r in rule.references) + "\n"
    Console().print(Markdown(text))
