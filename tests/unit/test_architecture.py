"""The shape of the code, checked from its imports (read with ``ast``, nothing imported).

* no import cycle between modules, counting every import: module level, inside functions
  and under ``TYPE_CHECKING``;
* the core's packages are layers: a module imports only from its own package or from the
  packages below it (``model`` at the bottom, ``admin`` at the top);
* the core imports no adapter, no composition root and no wire format (``proto``);
* an adapter imports from the core only ``pulsar_gateway.core`` itself, and only names it
  exports (its ``__all__``): never a core module, a lane, a key or a script;
* the sans-I/O codecs, the stored-entry codec (``pulsar_gateway.entry_codec``) and the binary
  frame codec (``pulsar_gateway.frame_codec``), sit below the adapters: they import no
  adapter, no composition root and no Spark, and from the core only its public API; the
  core imports neither;
* the Spark data source imports from the gateway only the core's public API, the two codecs,
  the key schema and scripts and the wire format (``proto``): nothing of an adapter;
* no module imports a private name (``_x``) of another module;
* no folder holds more than 15 modules;
* no module of the core outside ``core/storage`` spells a Redis command: plain commands are
  typed functions of ``core/storage`` (``registry``, ``policy_store``, ``topic_store``,
  ``fleet_store``), as the scripts are typed calls of ``core/storage/scripts``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "pulsar_gateway"
#: The Spark data source, installed as the top-level package ``pyspark_pulsar``.
SPARK = ROOT / "spark"

#: The core's layers, bottom first; a module may import its own layer and those below.
CORE_LAYERS = (
    ("errors", "futures", "gate", "periodic"),
    ("model",),
    ("storage",),
    ("policies",),
    ("topics",),
    ("fleet",),
    ("producing",),
    ("consuming",),
    ("admin",),
    ("services",),
)
MAX_MODULES_PER_FOLDER = 15


@dataclass(frozen=True)
class Import:
    """One name an importing module takes: ``module`` is the module imported from (or the
    module imported), ``name`` the name taken from it (None for ``import x``)."""

    module: str
    name: str | None
    line: int


def _module_name(path: Path) -> str:
    base = SPARK if path.is_relative_to(SPARK) else ROOT
    parts = list(path.relative_to(base).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _sources() -> dict[str, Path]:
    return {
        _module_name(path): path
        for path in [*PACKAGE.rglob("*.py"), *(SPARK / "pyspark_pulsar").rglob("*.py")]
        if not path.name.endswith("_pb2.py")
    }


def _imports(name: str, path: Path) -> Iterator[Import]:
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(alias.name, None, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            for alias in node.names:
                yield Import(base, alias.name, node.lineno)


SOURCES = _sources()
IMPORTS = {name: list(_imports(name, path)) for name, path in SOURCES.items()}


def _target(imp: Import) -> str | None:
    """The project module an import depends on: ``from pkg import mod`` names the module
    ``pkg.mod`` when it is one, else ``pkg``."""
    if imp.name is not None and f"{imp.module}.{imp.name}" in SOURCES:
        return f"{imp.module}.{imp.name}"
    return imp.module if imp.module in SOURCES else None


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {name: set() for name in SOURCES}
    for name, imports in IMPORTS.items():
        for imp in imports:
            target = _target(imp)
            if target is not None and target != name:
                graph[name].add(target)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _core_layer(module: str) -> int | None:
    parts = module.split(".")
    if parts[:2] != ["pulsar_gateway", "core"] or len(parts) < 3:
        return None
    for level, members in enumerate(CORE_LAYERS):
        if parts[2] in members:
            return level
    raise AssertionError(f"{module} is in no layer of CORE_LAYERS")


def test_the_checks_see_the_code() -> None:
    # a guard against a test that checks nothing: the tree and its imports are read
    assert "pulsar_gateway.core.consuming.dispatcher" in SOURCES
    dispatcher = _graph()["pulsar_gateway.core.consuming.dispatcher"]
    assert "pulsar_gateway.core.storage.lane" in dispatcher


def test_no_import_cycles() -> None:
    assert _cycles(_graph()) == []


def test_the_cycle_finder_finds_a_type_checking_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]


def test_core_layers_import_downwards_only() -> None:
    wrong = []
    for name, targets in _graph().items():
        level = _core_layer(name)
        if level is None:
            continue
        for target in targets:
            if target == "pulsar_gateway.core":
                wrong.append(f"{name} imports the core's public API")
                continue
            target_level = _core_layer(target)
            if target_level is None:
                if not target.startswith("pulsar_gateway.core"):
                    wrong.append(f"{name} -> {target}")
            elif target_level > level:
                wrong.append(f"{name} -> {target}")
    assert wrong == []


def test_the_core_knows_no_adapter_no_wire_format_and_no_composition_root() -> None:
    outside = (
        "pulsar_gateway.adapters",
        "pulsar_gateway.entry_codec",
        "pulsar_gateway.frame_codec",
        "pulsar_gateway.proto",
        "pulsar_gateway.server",
    )
    wrong = [
        f"{name}:{imp.line} {imp.module}"
        for name, imports in IMPORTS.items()
        if name.startswith("pulsar_gateway.core")
        for imp in imports
        if (_target(imp) or imp.module).startswith(outside)
    ]
    assert wrong == []


def _public_api() -> set[str]:
    tree = ast.parse(SOURCES["pulsar_gateway.core"].read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            return set(ast.literal_eval(node.value))
    raise AssertionError("pulsar_gateway.core has no __all__")


def test_adapters_use_only_the_core_public_api() -> None:
    public = _public_api()
    wrong = []
    for name, imports in IMPORTS.items():
        if not name.startswith("pulsar_gateway.adapters"):
            continue
        for imp in imports:
            if not imp.module.startswith("pulsar_gateway.core"):
                continue
            if imp.module != "pulsar_gateway.core" or imp.name not in public:
                wrong.append(f"{name}:{imp.line} {imp.module}.{imp.name}")
    assert wrong == []


CODECS = ("pulsar_gateway.entry_codec", "pulsar_gateway.frame_codec")


def test_the_codecs_sit_below_the_adapters() -> None:
    public = _public_api()
    outside = ("pulsar_gateway.adapters", "pulsar_gateway.server", "pyspark", "pyspark_pulsar")
    wrong = []
    for name, imports in IMPORTS.items():
        if not name.startswith(CODECS):
            continue
        for imp in imports:
            target = _target(imp) or imp.module
            if target.startswith(outside) or (
                target.startswith("pulsar_gateway.core")
                and (imp.module != "pulsar_gateway.core" or imp.name not in public)
            ):
                wrong.append(f"{name}:{imp.line} {imp.module}.{imp.name}")
    assert {"pulsar_gateway.entry_codec.blob", "pulsar_gateway.frame_codec"} <= set(SOURCES)
    assert wrong == []


#: What the Spark data source may take from the gateway besides the core's public API:
#: the key schema and stored-entry format it reads Redis with (docs/architecture.md "Design
#: decisions": one module owns the key schema and one the stored-entry format), the
#: stored-entry codec (blobs, batches, single messages, message ids), the frame codec its
#: producer speaks the binary protocol with, and the wire format; and the scripts' sources,
#: so a read by time finds its position with the gateway's own ``position_at_time.lua``
#: rather than a second copy of the ledger search.
SPARK_MAY_IMPORT = (
    "pulsar_gateway.core.storage.keys",
    "pulsar_gateway.core.storage.scripts",
    "pulsar_gateway.core.model.entry",
    *CODECS,
    "pulsar_gateway.proto",
)


def test_the_spark_source_uses_only_the_shared_modules() -> None:
    public = _public_api()
    assert "pyspark_pulsar.source" in SOURCES
    wrong = []
    for name, imports in IMPORTS.items():
        if not name.startswith("pyspark_pulsar"):
            continue
        for imp in imports:
            module = imp.module
            if not module.startswith("pulsar_gateway"):
                continue
            if module == "pulsar_gateway.core" and imp.name in public:
                continue
            if not (_target(imp) or module).startswith(SPARK_MAY_IMPORT):
                wrong.append(f"{name}:{imp.line} {module}.{imp.name}")
    assert wrong == []


def test_the_gateway_knows_no_spark() -> None:
    wrong = [
        f"{name}:{imp.line} {imp.module}"
        for name, imports in IMPORTS.items()
        if name.startswith("pulsar_gateway")
        for imp in imports
        if imp.module.startswith(("pyspark", "pyspark_pulsar"))
    ]
    assert wrong == []


def test_no_private_names_imported_across_modules() -> None:
    wrong = [
        f"{name}:{imp.line} {imp.module}.{imp.name}"
        for name, imports in IMPORTS.items()
        for imp in imports
        if imp.name is not None and imp.name.startswith("_") and not imp.name.startswith("__")
    ]
    assert wrong == []


@pytest.mark.parametrize(
    "folder", sorted({path.parent for path in SOURCES.values()}), ids=lambda p: p.name
)
def test_folders_stay_small(folder: Path) -> None:
    modules = [p for p in folder.glob("*.py") if p.name != "__init__.py" and "_pb2" not in p.name]
    assert len(modules) <= MAX_MODULES_PER_FOLDER, [p.name for p in modules]


CORE = PACKAGE / "core"
STORAGE = CORE / "storage"


def _redis_commands(path: Path) -> Iterator[str]:
    """Every ``x.call("COMMAND", ...)`` of a module: a call of a method named ``call`` whose
    first argument is a string literal."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "call"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            yield f"{path.relative_to(ROOT)}:{node.lineno} {node.args[0].value}"


def test_the_command_check_sees_commands() -> None:
    # a guard against a check that finds nothing: the storage modules do spell commands
    assert any(_redis_commands(STORAGE / "registry.py"))


def test_no_redis_command_is_spelled_in_the_core_outside_storage() -> None:
    wrong = [
        found
        for path in sorted(CORE.rglob("*.py"))
        if not path.is_relative_to(STORAGE)
        for found in _redis_commands(path)
    ]
    assert wrong == []
