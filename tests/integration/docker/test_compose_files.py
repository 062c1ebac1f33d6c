"""The cheap checks of compose/, which need no Docker engine (docs/fleet.md): the Compose
file is valid for both profiles, HAProxy accepts its configuration, and every file an image
build copies is in a fresh clone's build context, so ``docker compose up --build`` works
without ``compose/stack`` having run. ``./dev test`` installs the tools first
(``compose/stack tools``), so these run everywhere the suite runs; the fleet itself is
brought up by its own test."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path, PurePosixPath

import pytest
import yaml

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


# -- a fresh clone's build contexts ------------------------------------------------------------
# The Dockerfile reference (https://docs.docker.com/reference/dockerfile/) is what these
# follow: continuation lines, ARG scoping, COPY/ADD sources relative to the context (with
# Go's filepath.Match wildcards), and .dockerignore patterns, where a pattern that matches a
# directory excludes everything under it and the last matching pattern decides.

WILDCARD = re.compile(r"[*?\[]")


def glob_regex(pattern: str) -> re.Pattern[str]:
    """Go's filepath.Match as a regex (``*`` and ``?`` stay within one path segment), plus
    .dockerignore's ``**`` (any number of segments)."""
    out, i = "", 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif pattern.startswith("**", i):
            out, i = out + ".*", i + 2
        elif pattern[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif pattern[i] == "?":
            out, i = out + "[^/]", i + 1
        elif pattern[i] == "[" and "]" in pattern[i + 1 :]:
            end = pattern.index("]", i + 1)
            body = pattern[i + 1 : end]
            if body.startswith(("^", "!")):
                body = "^" + body[1:]
            out, i = out + "[" + body.replace("\\", "\\\\") + "]", end + 1
        else:
            out, i = out + re.escape(pattern[i]), i + 1
    return re.compile(out)


def parents_and_self(path: str) -> list[str]:
    parts = path.split("/")
    return ["/".join(parts[: n + 1]) for n in range(len(parts))]


def build_context(context: Path, files: list[str]) -> set[str]:
    """The files of ``files`` (paths relative to ROOT) that a build with this context sees:
    those under it, relative to it, less what its .dockerignore excludes."""
    prefix = context.relative_to(ROOT).as_posix()
    inside = [
        f if prefix == "." else f[len(prefix) + 1 :]
        for f in files
        if prefix == "." or f.startswith(prefix + "/")
    ]
    rules: list[tuple[bool, re.Pattern[str]]] = []
    ignore = context / ".dockerignore"
    if ignore.is_file():
        for line in ignore.read_text().splitlines():
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            keep = line.startswith("!")
            cleaned = os.path.normpath(line.lstrip("!").strip()).lstrip("/")
            rules.append((keep, glob_regex(cleaned)))
    seen = set()
    for f in inside:
        excluded = False
        for keep, rule in rules:
            if any(rule.fullmatch(p) for p in parents_and_self(f)):
                excluded = not keep
        if not excluded:
            seen.add(f)
    return seen


def instructions(text: str) -> list[tuple[str, str]]:
    """(keyword, arguments) of each instruction, continuation lines joined; comment lines,
    inside a continued instruction too, and empty lines are dropped."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        keyword, _, args = (pending + line).partition(" ")
        out.append((keyword.upper(), args.strip()))
        pending = ""
    return out


def expand(text: str, args: dict[str, str], where: str) -> str:
    def value(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2)
        assert name in args, f"{where}: ${name} is no ARG of this stage (it would be empty)"
        return args[name]

    return re.sub(r"\$\{(\w+)\}|\$(\w+)", value, text)


def missing_sources(dockerfile: str, context: set[str]) -> list[str]:
    """What the COPY and ADD instructions of a Dockerfile take from a build context that
    holds the files ``context`` and no more: one line per source that is not there."""
    dirs = {"/".join(f.split("/")[:n]) for f in context for n in range(f.count("/") + 1)}
    problems: list[str] = []
    global_args: dict[str, str] = {}
    args: dict[str, str] | None = None  # the current stage's, None before the first FROM
    for keyword, rest in instructions(dockerfile):
        where = f"{keyword} {rest}"
        if keyword == "FROM":
            args = {}
        elif keyword == "ARG":
            name, eq, default = rest.partition("=")
            scope = global_args if args is None else args
            scope[name] = default.strip("\"'") if eq else global_args.get(name, "")
        elif keyword in ("COPY", "ADD"):
            assert args is not None, f"{where}: before any FROM"
            words = json.loads(rest) if rest.startswith("[") else shlex.split(rest)
            flags = [w for w in words if w.startswith("--")]
            if any(f.startswith("--from=") for f in flags):
                continue  # from another stage or image, not from the context
            sources = [w for w in words if not w.startswith("--")][:-1]
            found_any, before = False, len(problems)
            for source in sources:
                if re.match(r"^(https?|git)://|^git@", source):
                    found_any = True
                    continue
                path = expand(source, args, where).lstrip("/").removeprefix("./").rstrip("/")
                path = str(PurePosixPath(path or "."))
                wild = WILDCARD.search(path)
                if wild is None:
                    if path == "." or path in context or path in dirs:
                        found_any = True
                    else:
                        problems.append(f"{where}: {path} is not in the build context")
                    continue
                # the directory a wildcard lists must be there (else "lstat ...: no such file
                # or directory"), even when no file matches
                parent = path[: path.rfind("/", 0, wild.start()) + 1].rstrip("/")
                if parent and parent not in dirs:
                    problems.append(f"{where}: {parent}/, where {path} looks, is not there")
                    continue
                matcher = glob_regex(path)
                if any(matcher.fullmatch(p) for p in context | dirs):
                    found_any = True
            if sources and not found_any and len(problems) == before:
                problems.append(f"{where}: no source is in the build context")
    return problems


def fresh_clone_files() -> list[str]:
    """The files of a fresh clone, relative to ROOT: the tracked ones, and the ones not yet
    tracked nor ignored (what the next commit adds). Ignored files, such as compose/.state/,
    are exactly what a fresh clone lacks."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        if os.environ.get("CI"):
            pytest.fail("CI must run from a git checkout with git on PATH")
        pytest.skip("not a git checkout: cannot tell a fresh clone's files")
    done = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return [f for f in done.stdout.split("\0") if f and (ROOT / f).exists()]


def compose_builds() -> list[tuple[Path, Path]]:
    """(context, Dockerfile) of every image compose.yaml builds."""
    spec = yaml.safe_load((COMPOSE / "compose.yaml").read_text())
    builds = set()
    for service in spec["services"].values():
        build = service.get("build")
        if build is None:
            continue
        if isinstance(build, str):
            build = {"context": build}
        context = (COMPOSE / build.get("context", ".")).resolve()
        builds.add((context, context / build.get("dockerfile", "Dockerfile")))
    return sorted(builds)


def test_every_file_an_image_build_copies_is_in_a_fresh_clone() -> None:
    files = fresh_clone_files()
    builds = compose_builds()
    assert (ROOT, ROOT / "Dockerfile") in builds
    problems = []
    for context, dockerfile in builds:
        assert dockerfile.relative_to(ROOT).as_posix() in files, f"{dockerfile} is not tracked"
        for problem in missing_sources(dockerfile.read_text(), build_context(context, files)):
            problems.append(f"{dockerfile.relative_to(ROOT)}: {problem}")
    assert not problems, "\n".join(problems)


def test_the_build_context_check_catches_a_missing_directory() -> None:
    # the check has teeth: a wildcard whose directory a fresh clone lacks (the wheelhouse
    # once lived in the git-ignored compose/.state/) and a file that is not there are caught
    context = build_context(ROOT, fresh_clone_files())
    dockerfile = (
        "FROM debian:bookworm\n"
        "ARG WHEELS=compose/.state/wheels\n"
        "COPY pyproject.toml ${WHEELS}* /wheels/\n"
        "COPY no-such-file /x\n"
        "COPY pulsar_gateway /src/pulsar_gateway\n"
    )
    problems = missing_sources(dockerfile, context)
    assert len(problems) == 2, problems
    assert "compose/.state/" in problems[0]
    assert "no-such-file" in problems[1]


def test_compose_stack_and_the_dockerfile_share_the_wheelhouse() -> None:
    stack = (COMPOSE / "stack").read_text()
    found = re.search(r"^WHEELHOUSE=\$HERE/(\S+)$", stack, re.MULTILINE)
    assert found, "compose/stack sets no WHEELHOUSE=$HERE/..."
    wheelhouse = f"compose/{found.group(1)}"
    defaults = re.findall(r"^ARG WHEELS=(\S+)$", (ROOT / "Dockerfile").read_text(), re.MULTILINE)
    assert defaults, "the Dockerfile has no ARG WHEELS=..."
    assert set(defaults) == {wheelhouse}
    # in every clone, but none of its wheels in git
    assert f"{wheelhouse}/.gitignore" in fresh_clone_files()
    ignored = subprocess.run(
        ["git", "check-ignore", "-q", f"{wheelhouse}/pulsar_redis_gateway-0-py3-none-any.whl"],
        cwd=ROOT,
        timeout=60,
    )
    assert ignored.returncode == 0, f"git would track the wheels of {wheelhouse}"
