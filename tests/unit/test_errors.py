"""The error tree drawn in ``pulsar_gateway.core.errors``'s docstring against the classes
that module defines: every error is drawn, under its base, with what the adapters map it to."""

from __future__ import annotations

import inspect
import re

from pulsar_gateway.core import errors
from pulsar_gateway.core.errors import GatewayError

#: ``├── Name`` or ``└── Name``: a node of the tree; the column of the branch gives its depth.
_NODE = re.compile(r"[├└]── (\w+)(?P<again> \.\.\.)?")


def _defined_errors() -> dict[str, type[GatewayError]]:
    return {
        name: cls
        for name, cls in inspect.getmembers(errors, inspect.isclass)
        if issubclass(cls, GatewayError) and cls.__module__ == errors.__name__
    }


def _tree() -> list[tuple[str, str | None, str]]:
    """(name, parent's name, line) of each node of the docstring's tree; a node marked
    ``...`` repeats an earlier one so that more children can be drawn under it."""
    doc = errors.__doc__ or ""
    block = doc.split("::\n\n", 1)[1].split("\n\n", 1)[0]
    root_line = block.splitlines()[0]
    root = root_line.split()[0]
    indent = len(root_line) - len(root_line.lstrip())
    stack = [root]  # the open node at each depth
    nodes: list[tuple[str, str | None, str]] = [(root, None, root_line)]
    for line in block.splitlines()[1:]:
        match = _NODE.search(line)
        if match is None:
            continue  # a continuation line of the node above
        depth = (match.start() - indent) // 4 + 1
        name = match.group(1)
        del stack[depth:]
        parent = stack[-1]
        stack.append(name)
        if match.group("again") is None:
            nodes.append((name, parent, line))
    return nodes


def test_every_error_class_is_drawn_in_the_tree() -> None:
    drawn = [name for name, _, _ in _tree()]
    assert len(drawn) == len(set(drawn)), "an error drawn twice (mark a repeat with ...)"
    defined = _defined_errors()
    missing = sorted(set(defined) - set(drawn))
    assert not missing, f"GatewayError subclasses missing from the docstring tree: {missing}"
    unknown = sorted(set(drawn) - set(defined))
    assert not unknown, f"the tree draws classes errors.py does not define: {unknown}"


def test_each_error_is_drawn_under_its_base_with_its_mapping() -> None:
    defined = _defined_errors()
    for name, parent, line in _tree():
        if parent is None:
            continue
        assert defined[name].__bases__ == (defined[parent],), f"{name} is not a {parent}"
        assert "->" in line or "HTTP" in line, f"{name}: no ServerError or HTTP status drawn"
