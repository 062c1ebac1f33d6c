"""The build switch of setup.py (``PULSAR_GATEWAY_COMPILE``): pure Python when asked or when
nothing can compile (saying why), a failed build when compiling is demanded and cannot be
done. Each build runs pip on a copy of the tracked files (a build writes ``build/`` beside
the sources, where this checkout's editable install lives)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tree = tmp_path_factory.mktemp("src")
    files = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, check=True, capture_output=True
    ).stdout.split(b"\0")
    for name in filter(None, files):
        path = ROOT / name.decode()
        if path.is_file():
            (tree / name.decode()).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, tree / name.decode())
    return tree


def _wheel(source: Path, out: Path, **env: str) -> subprocess.CompletedProcess[str]:
    # no build isolation: this venv's setuptools (and mypy), no download
    return subprocess.run(
        [
            *(sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "--no-build-isolation"),
            *("-w", str(out), str(source)),
        ],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=240,
    )


def test_compile_0_builds_pure_python(source: Path, tmp_path: Path) -> None:
    built = _wheel(source, tmp_path, PULSAR_GATEWAY_COMPILE="0")
    assert built.returncode == 0, built.stderr[-3000:]
    assert "pure Python (PULSAR_GATEWAY_COMPILE=0)" in built.stdout + built.stderr
    (wheel,) = tmp_path.glob("*.whl")
    assert wheel.name.endswith("-py3-none-any.whl")


def test_auto_without_a_compiler_builds_pure_python_and_says_why(
    source: Path, tmp_path: Path
) -> None:
    built = _wheel(source, tmp_path, PULSAR_GATEWAY_COMPILE="auto", CC="/nonexistent/cc")
    assert built.returncode == 0, built.stderr[-3000:]
    assert "pure Python: no working C compiler" in built.stdout + built.stderr
    (wheel,) = tmp_path.glob("*.whl")
    assert wheel.name.endswith("-py3-none-any.whl")


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"PULSAR_GATEWAY_COMPILE": "1", "CC": "/nonexistent/cc"}, "no working C compiler"),
        ({"PULSAR_GATEWAY_COMPILE": "yes"}, "PULSAR_GATEWAY_COMPILE must be auto, 1 or 0"),
    ],
)
def test_a_build_that_cannot_do_what_it_is_told_fails(
    source: Path, tmp_path: Path, env: dict[str, str], message: str
) -> None:
    built = _wheel(source, tmp_path, **env)
    assert built.returncode != 0
    assert message in built.stdout + built.stderr
    assert not list(tmp_path.glob("*.whl"))
