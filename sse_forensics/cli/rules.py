"""``sse-forensics rules list|show``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markdown import Markdown
from rich.table import Table
from rich.text import Text

from sse_forensics.cli.common import usage_error
from sse_forensics.engine.registry import load_rules

rules_app = typer.Typer(help="List the detection rules and explain one.", no_args_is_help=True)


@rules_app.command("list")
def rules_list(
    rules: Annotated[
        list[Path] | None, typer.Option("--rules", help="Extra rule directory.")
    ] = None,
) -> None:
    """List every rule with its severity and what it detects."""
    ruleset = load_rules(rules)
    table = Table()
    table.add_column("id", no_wrap=True)
    table.add_column("severity", no_wrap=True)
    table.add_column("verdict")
    table.add_column("table", no_wrap=True)
    table.add_column("title")
    for r in ruleset.rules:
        table.add_row(
            r.id, r.severity, r.classification or f"from {r.classification_from}", r.table, r.title
        )
    console = Console(highlight=False)
    console.print(table)
    for msg in ruleset.errors:
        console.print(Text(f"rule not loaded: {msg}", style="red"))


@rules_app.command("show")
def rules_show(
    rule_id: Annotated[str, typer.Argument(help="Rule id, e.g. missing-stream-gap.")],
    rules: Annotated[
        list[Path] | None, typer.Option("--rules", help="Extra rule directory.")
    ] = None,
) -> None:
    """Print a rule's rationale, remediation, example and predicate."""
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
