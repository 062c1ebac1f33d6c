"""Regenerate (or check) the committed Python modules for ``PulsarApi.proto``.

Usage::

    python -m pulsar_gateway.proto.regen          # rewrite PulsarApi_pb2.py and PulsarApi_pb2.pyi
    python -m pulsar_gateway.proto.regen --check   # exit 1 if the committed files are stale

Both modes run ``grpc_tools.protoc`` (``--python_out`` and ``--pyi_out``) into a
temporary directory, so a check never touches the working tree. The generated
files are committed so that the gateway needs only the ``protobuf`` runtime;
the check (also run by ``tests/unit/test_proto.py``) keeps them honest. Output
depends on the protoc version, pinned through ``grpcio-tools`` in pyproject.

``PulsarApi.proto`` imports nothing, so the generated module has no
cross-module imports to rewrite and loads as ``from proto import PulsarApi_pb2``.
One fix-up is applied to the stub: Pulsar's ``Schema.Type`` has an enum value
named ``None``, which protoc writes into the ``.pyi`` as ``None: ...``, a syntax
error that would stop mypy. Such keyword-named stub lines are dropped (the value
stays reachable at runtime as ``Schema.Type.Value("None")``).
"""

from __future__ import annotations

import argparse
import difflib
import keyword
import re
import sys
import tempfile
from pathlib import Path

__all__ = ["GENERATED", "PROTO_DIR", "PROTO_FILE", "generate", "main"]

PROTO_DIR = Path(__file__).resolve().parent
PROTO_FILE = PROTO_DIR / "PulsarApi.proto"
#: Files produced from PROTO_FILE, relative to PROTO_DIR.
GENERATED = ("PulsarApi_pb2.py", "PulsarApi_pb2.pyi")


def generate(out_dir: Path) -> dict[str, bytes]:
    """Run protoc on PROTO_FILE into ``out_dir``.

    Returns:
        The content of every file in GENERATED, keyed by file name.

    Raises:
        RuntimeError: protoc failed (its diagnostics are on stderr).
    """
    from grpc_tools import protoc  # imported lazily: only needed by this tool

    # Proto path = PROTO_DIR, so the descriptor's file name is "PulsarApi.proto"
    # and the output lands flat in out_dir.
    args = [
        "grpc_tools.protoc",
        f"--proto_path={PROTO_DIR}",
        f"--python_out={out_dir}",
        f"--pyi_out={out_dir}",
        PROTO_FILE.name,
    ]
    if protoc.main(args) != 0:
        raise RuntimeError(f"protoc failed on {PROTO_FILE}")
    files = {name: (out_dir / name).read_bytes() for name in GENERATED}
    files["PulsarApi_pb2.pyi"] = _drop_keyword_attributes(files["PulsarApi_pb2.pyi"])
    return files


# An attribute declaration in a stub: indentation, a name, then ":".
_STUB_ATTRIBUTE = re.compile(rb"^\s*(\w+):")


def _drop_keyword_attributes(stub: bytes) -> bytes:
    """Remove stub lines declaring an attribute named after a Python keyword."""
    kept = []
    for line in stub.splitlines(keepends=True):
        match = _STUB_ATTRIBUTE.match(line)
        if match and keyword.iskeyword(match.group(1).decode("ascii")):
            continue
        kept.append(line)
    return b"".join(kept)


def _stale(fresh: dict[str, bytes]) -> list[str]:
    """Names of GENERATED files whose committed content differs from ``fresh``."""
    stale = []
    for name, content in fresh.items():
        path = PROTO_DIR / name
        if not path.exists() or path.read_bytes() != content:
            stale.append(name)
    return stale


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the process exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m pulsar_gateway.proto.regen",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="do not write; exit 1 if the committed generated files are out of date",
    )
    opts = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="proto-regen-") as tmp:
        fresh = generate(Path(tmp))

    stale = _stale(fresh)
    if opts.check:
        for name in stale:
            path = PROTO_DIR / name
            old = path.read_text("utf-8").splitlines(keepends=True) if path.exists() else []
            new = fresh[name].decode("utf-8").splitlines(keepends=True)
            diff = difflib.unified_diff(old, new, f"committed/{name}", f"fresh/{name}", n=1)
            sys.stderr.writelines(list(diff)[:40])
            print(
                f"stale: pulsar_gateway/proto/{name} (run `python -m pulsar_gateway.proto.regen`)",
                file=sys.stderr,
            )
        return 1 if stale else 0

    for name in stale:
        (PROTO_DIR / name).write_bytes(fresh[name])
        print(f"wrote pulsar_gateway/proto/{name}")
    if not stale:
        print("pulsar_gateway/proto/ is up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
