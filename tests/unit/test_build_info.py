"""Which build runs (pulsar_gateway/_build.py): what ``--version`` and the start-up log say,
and, in a run of ``./dev test`` (which says which build it made, ``PGW_EXPECT_BUILD``), that
the tests run on that build."""

from __future__ import annotations

import os
import re

from pulsar_gateway import build_info
from pulsar_gateway._build import compiled_modules
from pulsar_gateway.core.storage import lane


def test_build_info_names_the_build_python_imports() -> None:
    info = build_info()
    compiled = compiled_modules()
    if compiled:
        assert info == f"compiled (mypyc, {len(compiled)} modules)"
        assert all(name.startswith("pulsar_gateway.") for name in compiled)
    else:
        assert info == "pure Python"
    # the lane is among the compiled modules whenever there are any
    assert (lane.__file__ or "").endswith(".py") == (not compiled)


def test_the_suite_runs_on_the_build_dev_test_made() -> None:
    expected = os.environ.get("PGW_EXPECT_BUILD")
    info = build_info()
    if expected == "compiled":
        assert re.fullmatch(r"compiled \(mypyc, \d+ modules\)", info), info
    elif expected == "pure":
        assert info == "pure Python"
    else:  # pytest run by hand: either build, but a known one
        assert expected is None and re.fullmatch(
            r"pure Python|compiled \(mypyc, \d+ modules\)", info
        )
