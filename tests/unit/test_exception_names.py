"""No function binds one name with ``except ... as`` clauses of different types.

mypy gives such a name the type of its first clause and checks every other clause's uses
against it; code compiled with mypyc checks the binding at run time, so a second clause
catching something that is not the first clause's type fails there. Each clause then has
its own name (or one clause catches the common base). Read with ``ast``, nothing imported.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted(
    path
    for path in [
        *(ROOT / "pulsar_gateway").rglob("*.py"),
        *(ROOT / "spark" / "pyspark_pulsar").rglob("*.py"),
    ]
    if not path.name.endswith("_pb2.py")
)
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


def _handlers(scope: ast.AST) -> dict[str, list[ast.ExceptHandler]]:
    """The named except clauses of one scope (a function, a class body, a module), by name,
    not counting those of the scopes nested in it."""
    found: dict[str, list[ast.ExceptHandler]] = {}

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, _SCOPES):
                continue
            if isinstance(child, ast.ExceptHandler) and child.name:
                found.setdefault(child.name, []).append(child)
            visit(child)

    visit(scope)
    return found


def _mixed_bindings(source: str, where: str) -> list[str]:
    wrong = []
    for scope in ast.walk(ast.parse(source, where)):
        if not isinstance(scope, (ast.Module, *_SCOPES)):
            continue
        for name, clauses in _handlers(scope).items():
            types = {ast.unparse(c.type) if c.type else "" for c in clauses}
            if len(types) > 1:
                lines = ", ".join(str(c.lineno) for c in clauses)
                wrong.append(f"{where}:{lines} {name}: {' / '.join(sorted(types))}")
    return wrong


def test_the_check_finds_a_name_bound_to_two_types() -> None:
    source = """
def f():
    try:
        pass
    except KeyError as exc:
        pass
    except (ValueError, OSError) as exc:
        pass
    try:
        pass
    except KeyError as exc:  # the same type again is fine
        pass

    def inner():  # a scope of its own
        try:
            pass
        except OSError as exc:
            pass
"""
    assert _mixed_bindings(source, "f.py") == [
        "f.py:5, 7, 11 exc: (ValueError, OSError) / KeyError"
    ]


def test_no_except_name_has_two_types() -> None:
    assert SOURCES
    wrong = [
        found
        for path in SOURCES
        for found in _mixed_bindings(path.read_text(), str(path.relative_to(ROOT)))
    ]
    assert wrong == []
