"""Where a token stands in a file's text: the key or value a problem's line and column point at.

Positions here are 0-based lines and characters (code points); the server turns them into the
client's units.  The spans come from the YAML parser's marks (JSON is YAML for where things stand);
a text the parser cannot read still gets a span: the word at the spot.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from yaml.nodes import Node


@dataclass(frozen=True)
class Span:
    """From (line, char) to (end_line, end_char), 0-based, the end excluded."""

    line: int
    char: int
    end_line: int
    end_char: int


#: A token where no key or value starts (a template inside a string, a text that cannot be parsed).
_BARE = re.compile(r"\$\{[^}]*\}?|[^\s,{}\[\]]+")


class Spans:
    """Every key's and value's span in one text, by where it starts."""

    def __init__(self, text: str) -> None:
        self.lines = text.splitlines()
        self._starts: dict[tuple[int, int], tuple[int, int]] | None = None
        self._text = text

    def starts(self) -> dict[tuple[int, int], tuple[int, int]]:
        if self._starts is None:
            # Imported here: the server answers initialize before the YAML parser is loaded.
            from pooler.pool.positions import compose_quietly  # noqa: PLC0415

            root = compose_quietly(self._text)
            self._starts = _node_spans(root, self.lines) if root is not None else {}
        return self._starts

    def at(self, line: int | None, column: int | None) -> Span:
        """The token a problem's 1-based ``line`` and ``column`` point at (the whole first line when
        the problem has no column, the file's start when it has no line)."""
        if line is None:
            return Span(0, 0, 0, len(self.lines[0]) if self.lines else 0)
        row = line - 1
        text = self.lines[row] if 0 <= row < len(self.lines) else ""
        if column is None:
            return Span(row, 0, row, len(text))
        char = column - 1
        end = self.starts().get((row, char))
        if end is not None:
            return Span(row, char, *end)
        bare = _BARE.match(text, char)
        if bare is not None and bare.end() > char:
            return Span(row, char, row, bare.end())
        return Span(row, char, row, min(char + 1, max(len(text), char)))


def _node_spans(root: Node, lines: list[str]) -> dict[tuple[int, int], tuple[int, int]]:
    """A node's start -> its end: scalars whole, flow collections whole, a block collection to the
    end of its first line (a squiggle over a hundred lines of steps would say nothing)."""
    from yaml.nodes import MappingNode, ScalarNode, SequenceNode  # noqa: PLC0415 - see Spans.starts

    found: dict[tuple[int, int], tuple[int, int]] = {}
    stack: list[Node] = [root]
    seen: set[int] = set()
    while stack:
        node = stack.pop()
        # An alias is the node it names, met again: walked once (a billion laughs stays small).
        if id(node) in seen:
            continue
        seen.add(id(node))
        start = (node.start_mark.line, node.start_mark.column)
        if isinstance(node, ScalarNode) or getattr(node, "flow_style", False):
            end = (node.end_mark.line, node.end_mark.column)
        else:
            row = node.start_mark.line
            end = (row, len(lines[row].rstrip()) if row < len(lines) else node.start_mark.column)
        found.setdefault(start, end)
        if isinstance(node, SequenceNode):
            stack.extend(node.value)
        elif isinstance(node, MappingNode):
            for key, value in node.value:
                stack.extend((key, value))
    return found
