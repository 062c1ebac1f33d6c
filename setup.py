"""The optional compiled build: the per-message modules compiled with mypyc.

Everything else about the package is in pyproject.toml; this file only decides the
extension modules. ``PULSAR_GATEWAY_COMPILE`` chooses:

* ``auto`` (the default): compile when mypyc is importable in the build environment and a
  C compiler works, else build pure Python, saying why in one line. pip builds in an
  isolated environment holding only ``[build-system] requires`` (setuptools), so a plain
  ``pip install .`` is pure Python; ``pip install --no-build-isolation .`` in an
  environment with mypy and the runtime dependencies compiles;
* ``1``: compile or fail. The build asks for mypy and what mypyc must read (below) as
  build requirements, so ``PULSAR_GATEWAY_COMPILE=1 pip install .`` works in isolation;
* ``0``: pure Python.

mypyc compiles from mypy's view of the code (mypyc/build.py: ``mypycify`` type-checks the
files with mypy first, and a type error stops the build), so it reads
the types of everything the compiled modules import: the runtime dependencies' own inline
types (redis-py, aiohttp, hiredis, orjson, ... ship ``py.typed``) and protobuf's stubs
(``types-protobuf``). Missing, mypy reports the import and the build fails; hence the
extra build requirements of ``1``, read from pyproject.toml's dependencies. The options are
pyproject.toml's ``[tool.mypy]`` (mypyc's ``mypycify`` runs mypy's option parsing in the
source directory).

Compiled modules replace the ``.py`` of the same name: each becomes an extension module
beside it (``lane.cpython-311-x86_64-linux-gnu.so``), which Python's path finder prefers to
source in the same directory (``importlib.machinery`` lists extension suffixes first), and
all share one library, ``pulsar_gateway__mypyc``. ``pulsar_gateway.build_info()`` says
which build runs. A wheel holds both (a ``cp311-cp311-linux_x86_64`` wheel, not
``py3-none-any``). An editable install that compiles (``PULSAR_GATEWAY_COMPILE=1 pip
install -e .``) builds the extension modules into the source tree itself, where they
shadow the ``.py`` for every import from the tree, tests included: an edit to a compiled
module then has no effect until it is built again or its ``.so`` deleted (``*.so`` is in
.gitignore). ``./dev`` builds in isolation with ``auto``: pure Python, as before.
"""

from __future__ import annotations

import os
import sys
import tempfile
import tomllib
from pathlib import Path

from setuptools import setup

HERE = Path(__file__).resolve().parent

#: The modules on the per-message paths (binary and WebSocket produce and consume, the
#: storage lane and its scripts), and the per-topic loops of a ``/metrics`` scrape and of
#: the admin stats (topic_stats.py, topic_metrics.py: 1,000 topics' figures and text in
#: 8.7 ms instead of 11). Not core/storage/connections.py: its classes derive from
#: redis-py's slotted connection classes, and a class built at run time with type() derives
#: from them, which a native class does not allow (mypyc's docs, "Native classes").
#: Nor entry_codec/checksum.py: its work is the crc32c package's C code, and a test loads a
#: second copy of it from its file with that package hidden (tests/unit/test_entry_codec.py).
COMPILED = [
    "pulsar_gateway/frame_codec.py",
    "pulsar_gateway/entry_codec/batch.py",
    "pulsar_gateway/entry_codec/blob.py",
    "pulsar_gateway/entry_codec/compression.py",
    "pulsar_gateway/entry_codec/message_id_data.py",
    "pulsar_gateway/entry_codec/messages.py",
    "pulsar_gateway/entry_codec/metadata.py",
    "pulsar_gateway/entry_codec/varint.py",
    "pulsar_gateway/adapters/pulsar_binary/acks.py",
    "pulsar_gateway/adapters/pulsar_binary/commands.py",
    "pulsar_gateway/adapters/pulsar_binary/connection.py",
    "pulsar_gateway/adapters/pulsar_binary/consumer_side.py",
    "pulsar_gateway/adapters/pulsar_binary/discovery.py",
    "pulsar_gateway/adapters/pulsar_binary/producer_side.py",
    "pulsar_gateway/adapters/pulsar_binary/server.py",
    "pulsar_gateway/adapters/pulsar_binary/session.py",
    "pulsar_gateway/adapters/pulsar_binary/session_state.py",
    "pulsar_gateway/adapters/websocket/consumer.py",
    "pulsar_gateway/adapters/websocket/frames.py",
    "pulsar_gateway/adapters/websocket/params.py",
    "pulsar_gateway/adapters/websocket/producer.py",
    "pulsar_gateway/adapters/websocket/routes.py",
    "pulsar_gateway/adapters/websocket/routing.py",
    "pulsar_gateway/adapters/websocket/session.py",
    "pulsar_gateway/core/producing/producer.py",
    "pulsar_gateway/core/consuming/consumer.py",
    "pulsar_gateway/core/consuming/dispatcher.py",
    "pulsar_gateway/core/storage/lane.py",
    "pulsar_gateway/core/storage/cluster_lane.py",
    "pulsar_gateway/core/storage/scripts/acks.py",
    "pulsar_gateway/core/storage/scripts/append.py",
    "pulsar_gateway/core/storage/scripts/cursors.py",
    "pulsar_gateway/core/storage/scripts/dispatch.py",
    "pulsar_gateway/core/storage/scripts/producers.py",
    "pulsar_gateway/core/storage/scripts/subscriptions.py",
    "pulsar_gateway/core/fleet/topic_metrics.py",
    "pulsar_gateway/core/fleet/topic_stats.py",
]

#: Build requirements of a compiled build beyond pyproject.toml's dependencies: mypy (the
#: version the project type-checks with) and the stubs of protobuf.
COMPILE_REQUIRES = ["mypy==2.4.1", "types-protobuf"]


def _say(message: str) -> None:
    print(f"pulsar-redis-gateway: {message}", file=sys.stderr, flush=True)


def _mode() -> str:
    mode = os.environ.get("PULSAR_GATEWAY_COMPILE", "auto").strip().lower() or "auto"
    if mode not in ("auto", "0", "1"):
        sys.exit(f"PULSAR_GATEWAY_COMPILE must be auto, 1 or 0, not {mode!r}")
    return mode


def _compiler_problem() -> str | None:
    """Why no C extension can be built here, or None when a trial one compiles."""
    from setuptools._distutils.ccompiler import new_compiler
    from setuptools._distutils.errors import CCompilerError, DistutilsError
    from setuptools._distutils.sysconfig import customize_compiler, get_python_inc

    compiler = new_compiler()
    customize_compiler(compiler)
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp, "probe.c")
        source.write_text("#include <Python.h>\nint probe(void) { return 0; }\n")
        try:
            compiler.compile([str(source)], output_dir=tmp, include_dirs=[get_python_inc()])
        except (CCompilerError, DistutilsError, OSError) as exc:
            return f"no working C compiler ({str(exc).strip().splitlines()[-1]})"
    return None


def _mypyc_problem() -> str | None:
    try:
        import mypyc.build  # noqa: F401
    except ImportError:
        return (
            "mypyc is not importable in the build environment (pip builds in isolation: "
            "PULSAR_GATEWAY_COMPILE=1 fetches it, --no-build-isolation uses this one's)"
        )
    return None


#: setup.py commands that build the extension modules; the others (egg_info, dist_info:
#: pip's get_requires_for_build_* and prepare_metadata_for_build_* steps) only read
#: metadata, and compiling there would compile three times per install
BUILDING = {"build", "build_ext", "bdist_wheel", "editable_wheel", "develop", "install"}


def _ext_modules(mode: str) -> list[object]:
    if not BUILDING.intersection(sys.argv[1:]):
        return []
    if mode == "0":
        _say("pure Python (PULSAR_GATEWAY_COMPILE=0)")
        return []
    problem = _mypyc_problem() or _compiler_problem()
    if problem is not None:
        if mode == "1":
            sys.exit(f"pulsar-redis-gateway: PULSAR_GATEWAY_COMPILE=1, but {problem}")
        _say(f"pure Python: {problem}")
        return []
    from mypyc.build import mypycify

    _say(f"compiling {len(COMPILED)} modules with mypyc")
    # group_name: the shared library's name (else a hash of the module list); opt_level
    # "3" is mypycify's default (mypyc/build.py), -O3, spelled out for the reader
    return list(mypycify(COMPILED, opt_level="3", group_name="pulsar_gateway"))


def _compile_requires(mode: str) -> list[str]:
    # setuptools' build backend reports setup_requires as the build's extra requirements
    # (setuptools/build_meta.py, get_requires_for_build_wheel), which pip installs into the
    # isolated build environment before it builds
    if mode != "1":
        return []
    project = tomllib.loads((HERE / "pyproject.toml").read_text())["project"]
    return [*project["dependencies"], *COMPILE_REQUIRES]


os.chdir(HERE)  # mypy maps COMPILED's relative paths to modules from here
MODE = _mode()
setup(ext_modules=_ext_modules(MODE), setup_requires=_compile_requires(MODE))
