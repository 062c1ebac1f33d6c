"""The cheap checks of compose/, which need no Docker engine (docs/fleet.md): the Compose
file is valid for both profiles, and HAProxy accepts its configuration. ``./dev test``
installs the tools first (``compose/stack tools``), so these run everywhere the suite runs;
the fleet itself is brought up by its own test."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from tests.conftest import ROOT

COMPOSE = ROOT / "compose"


def tool(name: str) -> str:
    found = shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail(f"CI must provide {name} (./dev test runs compose/stack tools)")
        pytest.skip(f"no {name} on PATH: run compose/stack tools")
    return found


def compose_config(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [tool("docker"), "compose", "config", *args],
        cwd=COMPOSE,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    "profile",
    [
        {"COMPOSE_PROFILES": "single"},
        {"COMPOSE_PROFILES": "cluster", "REDIS_URL": "redis://redis-1:6379"},
    ],
    ids=["single", "cluster"],
)
def test_the_compose_file_is_valid(profile: dict[str, str]) -> None:
    done = compose_config(profile, "--services")
    assert done.returncode == 0, done.stderr
    services = set(done.stdout.split())
    fleet = {"gateway", "haproxy", "prometheus", "spark-pipeline"}
    if profile["COMPOSE_PROFILES"] == "single":
        assert services == fleet | {"redis"}
    else:
        nodes = {f"redis-{i}" for i in range(1, 7)}
        assert services == fleet | nodes | {"redis-cluster-init"}
    quiet = compose_config(profile, "-q")
    assert quiet.returncode == 0, quiet.stderr


def test_haproxy_accepts_its_configuration() -> None:
    done = subprocess.run(
        [tool("haproxy"), "-c", "-f", str(COMPOSE / "haproxy" / "haproxy.cfg")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Configuration file is valid" in done.stdout + done.stderr


def test_a_broken_haproxy_configuration_is_caught(tmp_path: os.PathLike[str]) -> None:
    # the check has teeth: a backend naming no known balance algorithm is refused
    text = (COMPOSE / "haproxy" / "haproxy.cfg").read_text()
    broken = os.path.join(tmp_path, "haproxy.cfg")
    with open(broken, "w") as f:
        f.write(text.replace("balance leastconn", "balance fastest-please"))
    done = subprocess.run(
        [tool("haproxy"), "-c", "-f", broken], capture_output=True, text=True, timeout=60
    )
    assert done.returncode != 0
