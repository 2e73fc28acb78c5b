"""One way to put a user's text into an MLflow filter string: ``literal`` quotes it, or refuses it.

MLflow's filter parser (``SearchUtils``, and the evaluation datasets' own) takes a string literal in single or
double quotes and reads what is between them as it is: no escapes, a backslash is a backslash. So a value is safe
in the quote it does not hold: ``o'brien`` goes in double quotes, ``say "hi"`` in single ones. A value holding
both quotes cannot be written as one literal and is refused with one line (exit 2), never pasted in to become
another clause (``name = 'o'brien'`` was a traceback; ``x' OR name LIKE '%`` would have matched every dataset).

    client.search_runs([eid], f"tags.`{tag.RUN_FOLDER}` = {literal(folder.name, 'run folder name')}")
"""
from __future__ import annotations

from kbench.errors import UserError


class FilterValueError(UserError, ValueError):
    """A name that no MLflow filter string can hold (both quote characters, or a control character)."""


def literal(value: str, what: str) -> str:
    """``value`` as an MLflow filter-string literal, quoted; ``what`` names it in the refusal (``--name``)."""
    value = str(value)
    if any(ord(ch) < 32 for ch in value):
        raise FilterValueError(f"{what}: holds a control character (a newline, a tab ...); give a name without one")
    if "'" not in value:
        return f"'{value}'"
    if '"' not in value:
        return f'"{value}"'
    raise FilterValueError(f"{what}: holds both a single and a double quote, which no MLflow search can match; "
                           "give a name with at most one kind of quote")
