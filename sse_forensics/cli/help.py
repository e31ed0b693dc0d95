"""``--help`` in the words of the docs: ``PATH...`` and ``FILE``, never a Python type.

typer prints an argument as ``{paths}...`` in the usage line and ``<list[str]>`` beside it;
this command class prints its metavar instead (options get theirs from ``metavar=``). Typed
``Any``: click's classes live in ``click`` or inside typer depending on typer's version.
"""

from __future__ import annotations

from typing import Any

import typer.core


def _argument_name(param: Any) -> str:
    name = param.metavar or (param.name or "").upper()
    if param.nargs != 1 and not name.endswith("..."):
        name += "..."
    return name


def _usage(command: Any, ctx: Any) -> list[str]:
    pieces = [command.options_metavar] if command.options_metavar else []
    for param in command.get_params(ctx):
        if param.param_type_name == "argument":
            name = _argument_name(param)
            pieces.append(name if param.required else f"[{name}]")
    return pieces


class Command(typer.core.TyperCommand):
    """A command whose usage line and argument list name arguments by their metavar."""

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        return _usage(self, ctx)

    def format_options(self, ctx: Any, formatter: Any) -> None:
        arguments, options = [], []
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is None:
                continue
            if param.param_type_name == "argument":
                arguments.append((_argument_name(param), getattr(param, "help", None) or ""))
            else:
                options.append(record)
        if arguments:
            with formatter.section("Arguments"):
                formatter.write_dl(arguments)
        if options:
            with formatter.section("Options"):
                formatter.write_dl(options)
