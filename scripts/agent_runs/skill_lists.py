"""Where the skills are in an agent's model request.

- Claude Code: ``POST /v1/messages`` (streamed). The skill list is a ``role: "system"`` message
  of ``messages`` (after the first user message): CLAUDE_SKILLS_HEADER, a blank line, then one
  ``- <name>: <description>`` line per skill, built-in skills included. A running Claude Code
  that notices a change in its skill directories (a SKILL.md whose size or mtime changed, or a
  new skill) sends those skills in a new system message of its next request
  (``claude_skill_lists``); it never says that a skill was removed.
- Codex: ``POST /v1/responses`` (streamed). The skill list is a developer message of ``input``:
  a roots table (``- `r0` = `<dir>` ``), CODEX_SKILLS_HEADER, then one
  ``- <name>: <description> (file: r0/<name>/SKILL.md)`` line per skill, its system skills
  (``~/.codex/skills/.system``) included.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Any

CLAUDE_SKILLS_HEADER = "The following skills are available for use with the Skill tool:"
CODEX_SKILLS_HEADER = "### Available skills"
_ENTRY = re.compile(r"^- ([^\s:]+): (.*)$")
_CODEX_ENTRY = re.compile(r"^- ([^\s:]+): (.*) \(file: ([^()]*)\)$")
_CODEX_ROOT = re.compile(r"^- `([^`]+)` = `([^`]+)`$")


def _strings(value: Any) -> Iterator[str]:
    """Every string in a decoded JSON value, depth first, in order."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _sections(body: Any, header: str) -> list[list[str]]:
    """For each string of ``body`` that holds ``header``, in order: the lines after it, up to
    the first blank line after the entries (or the end of that string)."""
    found = []
    for text in _strings(body):
        if header not in text:
            continue
        lines: list[str] = []
        for line in text.split(header, 1)[1].splitlines():
            if not line.strip():
                if lines:
                    break
                continue
            lines.append(line)
        found.append(lines)
    return found


def _claude_entries(lines: Sequence[str]) -> list[tuple[str, str]]:
    entries: list[tuple[str, str]] = []
    for line in lines:
        match = _ENTRY.match(line)
        if match:
            entries.append((match.group(1), match.group(2)))
        elif entries:
            name, description = entries[-1]
            entries[-1] = (name, description + "\n" + line)
    return entries


def claude_skill_lists(body: Any) -> list[list[tuple[str, str]]]:
    """Every skill list of one Messages request body, in order. A later request of a running
    Claude Code carries the conversation so far: its first list is the one it started with, and
    each change to the skill directories it noticed since adds a system message listing the
    skills added or changed."""
    return [_claude_entries(lines) for lines in _sections(body, CLAUDE_SKILLS_HEADER)]


def claude_skills_in(body: Any) -> list[tuple[str, str]]:
    """The (name, description) entries of the first skill list of one Messages request body:
    the ``- <name>: <description>`` lines after CLAUDE_SKILLS_HEADER (a description's
    continuation lines joined with newlines). Empty when the request lists no skills."""
    lists = claude_skill_lists(body)
    return lists[0] if lists else []


def codex_skill_files(body: Any) -> dict[str, str]:
    """Name -> the absolute SKILL.md path each entry of a Codex skill list names (its short
    ``rN/...`` path expanded with the skill roots table of the same message)."""
    roots: dict[str, str] = {}
    files: dict[str, str] = {}
    for text in _strings(body):
        if CODEX_SKILLS_HEADER not in text:
            continue
        for line in text.splitlines():
            root = _CODEX_ROOT.match(line)
            if root:
                roots[root.group(1)] = root.group(2)
            entry = _CODEX_ENTRY.match(line)
            if entry:
                short = entry.group(3)
                head, _, rest = short.partition("/")
                files[entry.group(1)] = f"{roots[head]}/{rest}" if head in roots else short
        break
    return files


def codex_skills_in(body: Any) -> list[tuple[str, str]]:
    """The (name, description) entries of the skill list in one Responses request body: the
    ``- <name>: <description> (file: <path>)`` lines after CODEX_SKILLS_HEADER."""
    entries = []
    for line in next(iter(_sections(body, CODEX_SKILLS_HEADER)), []):
        match = _CODEX_ENTRY.match(line)
        if match:
            entries.append((match.group(1), match.group(2)))
    return entries


