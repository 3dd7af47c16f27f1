"""Aligned Markdown tables for the benchmarks' output."""

from __future__ import annotations

from collections.abc import Sequence


def markdown_table(lines: Sequence[Sequence[str]], numeric: set[int]) -> str:
    """`lines[0]` is the header; columns in `numeric` are right-aligned."""
    widths = [max(len(line[index]) for line in lines) for index in range(len(lines[0]))]

    def render(cells: Sequence[str]) -> str:
        padded = (
            cell.rjust(widths[index]) if index in numeric else cell.ljust(widths[index])
            for index, cell in enumerate(cells)
        )
        return "| " + " | ".join(padded) + " |"

    rule = (
        "|"
        + "|".join(
            "-" * (width + 1) + ":" if index in numeric else "-" * (width + 2)
            for index, width in enumerate(widths)
        )
        + "|"
    )
    return "\n".join([render(lines[0]), rule, *(render(line) for line in lines[1:])])
