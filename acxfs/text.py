"""Text from containers made safe to show, and verdict summaries in one form.

Invariant: `printable` returns text in which no control, unprintable or lone surrogate
character survives (each is shown as its escape), so no byte from a container can drive a
terminal or forge a log line; every terminal and log line acxfs prints about a container
goes through it.
"""

from __future__ import annotations


def printable(text: str) -> str:
    """Untrusted text made safe for a terminal: control, unprintable and lone surrogate
    characters are shown as escapes, so no byte from a container can drive the terminal."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def sentence(text: str, *, capitalise_path: bool = False) -> str:
    """One summary sentence with a full stop at the end, its first letter capitalised unless
    it starts with a path (a first word that is not all letters), or `capitalise_path`."""
    if capitalise_path or text.split(" ", 1)[0].isalpha():
        text = text[:1].upper() + text[1:]
    return text if text.endswith(".") else text + "."
