"""What an agent's session hooks read and print: on `memsync context`'s fast path.

    HookShape          how much of a session-start hook's output an agent shows its model,
                       counted how, and whether it wants the JSON envelope
    SHAPES             each agent's (`memsync context --hook --agent NAME`)
    fit(build, shape)  the session-start block, built to fit the agent's limit
    output(block, ..)  what the hook prints
    hook_cwd(stdin)    the `cwd` of the JSON the agent sends a hook on stdin
    fast(arguments)    whether `memsync context ARGUMENTS` takes the fast path

The agents' integrations (`sync_client/agents/`) install the hooks; this module holds
only what the hook itself needs at every session start, so that path never imports the
integrations (their settings-file code and the configuration cost tens of milliseconds).
Measured limits:
- Claude Code inlines 10,000 characters (UTF-16 units) of a hook's output
  (`claude_code.HOOK_OUTPUT_MAX_CHARS`); plain stdout.
- Codex 0.171 shows its model a hook's text while its approximate token count (UTF-8
  bytes / 4) is at most 2,500, that is 10,000 bytes; a longer text is cut in its middle
  (the head and the tail kept) and saved whole under `$CODEX_HOME/hook_outputs/`. The
  block is built to fit, so its end (the rules' closing marker, the count of lines left
  out) always arrives. Printed as `hookSpecificOutput.additionalContext`.
- Gemini CLI 0.61 sets no limit of its own: the block keeps Claude Code's 10,000
  characters. It must be JSON `hookSpecificOutput.additionalContext` (plain stdout is
  shown to the user, not given to the model); Gemini CLI escapes `<` and `>` in it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, NamedTuple

from sync_client.claude_code import HOOK_OUTPUT_MAX_CHARS, utf16_length

__all__ = [
    "DEFAULT_AGENT",
    "SHAPES",
    "HookShape",
    "agent_of",
    "fast",
    "fit",
    "hook_cwd",
    "output",
]


class HookShape(NamedTuple):
    """How an agent takes a session-start hook's output."""

    # The most the agent shows its model, in `unit`s.
    limit: int
    unit: Literal["utf16", "utf8"]
    # The event named in `{"hookSpecificOutput": {"hookEventName": ..., "additionalContext":
    # ...}}`, or None for plain stdout.
    json_event: str | None = None
    # A line the block adds for this agent (how it writes a note), or None.
    note: str | None = None


DEFAULT_AGENT = "claude-code"
CODEX_HOOK_OUTPUT_MAX_BYTES = 10_000
SHAPES: dict[str, HookShape] = {
    "claude-code": HookShape(HOOK_OUTPUT_MAX_CHARS, "utf16"),
    "codex": HookShape(
        CODEX_HOOK_OUTPUT_MAX_BYTES,
        "utf8",
        "SessionStart",
        "In Codex, write team notes and MEMORY.md with memsync's MCP tool `write_note` "
        "(read with `memory_index`, `read_note`, `search_notes`): the team memory folder "
        "is outside the folders Codex's sandbox lets you write.",
    ),
    "gemini": HookShape(
        HOOK_OUTPUT_MAX_CHARS,
        "utf16",
        "SessionStart",
        "In Gemini CLI, write team notes and MEMORY.md with memsync's MCP tool `write_note` "
        "(read with `memory_index`, `read_note`, `search_notes`): the team memory folder "
        "is outside the workspace Gemini CLI's file tools reach.",
    ),
}


def _length(text: str, unit: str) -> int:
    return len(text.encode("utf-8")) if unit == "utf8" else utf16_length(text)


def fit(build: Callable[[int], str], shape: HookShape) -> str:
    """`build(max_chars)` (a block of at most `max_chars` UTF-16 units, cut on line
    boundaries) for a budget whose block fits `shape`'s limit, as full as a few builds
    find.

    A UTF-16 unit is one to three UTF-8 bytes, and the block's length grows about in a
    line with its budget: between a budget over the limit and one under it, the next
    try is where that line meets the limit (six builds at most; the last resort leaves
    the index out)."""
    high = shape.limit
    block = build(high)
    high_length = _length(block, shape.unit)
    if high_length <= shape.limit:
        return block
    low, best = 0, build(0)
    low_length = _length(best, shape.unit)
    if low_length > shape.limit:
        return best
    for _ in range(4):
        if high - low <= 16:
            break
        share = (shape.limit - low_length) / max(1, high_length - low_length)
        budget = min(high - 1, max(low + 1, low + int((high - low) * share)))
        block = build(budget)
        length = _length(block, shape.unit)
        if length <= shape.limit:
            low, low_length, best = budget, length, block
        else:
            high, high_length = budget, length
    return best


def output(block: str, shape: HookShape) -> str:
    """What the hook prints: the block, or the agent's JSON envelope around it."""
    if not block or shape.json_event is None:
        return block
    envelope = {
        "hookSpecificOutput": {"hookEventName": shape.json_event, "additionalContext": block}
    }
    return json.dumps(envelope, ensure_ascii=False) + "\n"


def hook_cwd(stdin: Any) -> Path | None:
    """The `cwd` of the hook's JSON on stdin (Claude Code and Codex send it), if any."""
    try:
        if stdin is None or stdin.isatty():
            return None
        import select

        ready, _, _ = select.select([stdin], [], [], 0.2)
        if not ready:
            return None
        data = json.loads(stdin.read(1_000_000) or "{}")
    except (OSError, ValueError, TypeError):
        return None
    cwd = data.get("cwd") if isinstance(data, dict) else None
    if isinstance(cwd, str) and os.path.isabs(cwd) and os.path.isdir(cwd):
        return Path(cwd)
    return None


def agent_of(arguments: list[str]) -> str | None:
    """The NAME of `--agent NAME` when it is one of `SHAPES`, else None."""
    if "--agent" not in arguments:
        return None
    at = arguments.index("--agent") + 1
    return arguments[at] if at < len(arguments) and arguments[at] in SHAPES else None


def fast(arguments: list[str]) -> bool:
    """Whether the fast path understands `arguments` (after `context`); anything else goes
    through the full CLI (its help, its usage errors)."""
    rest = list(arguments)
    if "--agent" in rest:
        if agent_of(rest) is None or rest.count("--agent") > 1:
            return False
        del rest[rest.index("--agent") : rest.index("--agent") + 2]
    return set(rest) <= {"--hook", "--session-end", "--no-pull"}
