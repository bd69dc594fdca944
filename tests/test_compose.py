"""docker-compose.yml and deploy/: what can be proven without a Docker engine.

The compose file is read as data and checked against the workspace itself: every
process runs a console script its package installs, every SEEDLINE_* variable is a
setting, every workspace module an image's code imports is one its package depends on,
deploy/nats.conf really starts a nats-server with fsync on every write, the health
check really tells a ready service from a missing one, and (slow) the Dockerfile's own
`uv sync` line installs each service into an empty environment. `make test-containers`
(deploy/containers/test.sh) builds the images and runs the file for real.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import tomllib
import urllib.request
from pathlib import Path

import pytest
import yaml

from seedline_devtools.embedded import free_port, nats_server_binary, wait_for_port
from seedline_platform.settings import SETTINGS_DOC

REPO = Path(__file__).resolve().parents[1]
COMPOSE = REPO / "docker-compose.yml"
DOCKERFILE = REPO / "deploy" / "Dockerfile"
NATS_CONF = REPO / "deploy" / "nats.conf"
HEALTHCHECK = REPO / "deploy" / "healthcheck.py"
SERVICES = ("timeline-writer", "continuity-resolver", "seed-composer", "runner-gateway")
INFRA = ("nats", "postgres")
CONDITIONS = {"service_started", "service_healthy", "service_completed_successfully"}


def compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


def packages() -> dict[str, dict]:
    """Workspace package name -> its [project] table."""
    out = {}
    for path in sorted(REPO.glob("libs/*/pyproject.toml")) + sorted(
        REPO.glob("services/*/pyproject.toml")
    ):
        project = tomllib.loads(path.read_text())["project"]
        out[project["name"]] = project
    return out


def built_processes() -> dict[str, tuple[str, str, list[str]]]:
    """Compose service -> (package installed, console script run, its argv)."""
    out = {}
    for name, spec in compose()["services"].items():
        if "build" not in spec:
            continue
        args = spec["build"].get("args") or {}
        script = args["SERVICE"]
        package = args.get("PACKAGE", script)
        argv = spec.get("command") or [script]
        out[name] = (package, script, argv)
    return out


def default_image(spec: dict) -> str:
    """The image a service runs when no variable overrides it: `${VAR:-image}` -> image."""
    match = re.fullmatch(r"\$\{SEEDLINE_[A-Z_]+_IMAGE:-([^}]+)\}", spec["image"])
    return match.group(1) if match else spec["image"]


def dockerfile_instructions() -> list[str]:
    """Instructions with continuation lines joined and comments dropped."""
    text = "\n".join(
        line for line in DOCKERFILE.read_text().splitlines() if not line.lstrip().startswith("#")
    )
    return [" ".join(i.split()) for i in re.sub(r"\\\n", " ", text).splitlines() if i.strip()]


# -- compose file ----------------------------------------------------------------------


def test_compose_runs_nats_postgres_and_the_four_services():
    services = compose()["services"]
    assert set(INFRA + SERVICES) <= set(services)
    assert all(services[name].get("profiles") is None for name in INFRA + SERVICES)
    demo = services["demo-runner"]
    assert demo["profiles"] == ["demo"]
    assert demo["command"] == [
        "seedline",
        "runner",
        "--node-id",
        "demo-runner",
        "--label",
        "Demo runner",
        "--engine",
        "scripted",
    ]


def test_every_process_runs_a_console_script_its_package_installs():
    projects = packages()
    processes = built_processes()
    assert set(SERVICES) <= set(processes)
    for name, (package, script, argv) in processes.items():
        assert package in projects, f"{name}: build arg names {package}, not a workspace package"
        scripts = projects[package].get("scripts") or {}
        assert script in scripts, f"{name}: {package} installs {sorted(scripts)}, not {script}"
        assert argv[0] == script, f"{name}: runs {argv[0]}, but the image was built for {script}"
    for service in SERVICES:
        assert processes[service][:2] == (service, service)


def test_every_service_scales_out_and_the_file_says_how():
    """Copies of a service share its consumers (CONTRACT.md Processes, 1.2): nothing in a
    service's spec may name one container (a container name, a host port, a hostname)."""
    services = compose()["services"]
    for name in SERVICES:
        spec = services[name]
        assert not {"container_name", "ports", "hostname"} & spec.keys(), name
    header = COMPOSE.read_text().split("\nname:")[0]
    assert "docker compose up" in header.split("Scaling out")[1]
    shown = set(re.findall(r"--scale [\w-]+=\d+", header))
    assert {f"--scale {name}=2" for name in SERVICES} <= shown


def test_every_seedline_variable_is_a_setting():
    used = set(re.findall(r"\bSEEDLINE_[A-Z0-9_]+", COMPOSE.read_text()))
    used |= set(re.findall(r"\bSEEDLINE_[A-Z0-9_]+", DOCKERFILE.read_text()))
    for spec in compose()["services"].values():
        used |= {k for k in spec.get("environment") or {} if k.startswith("SEEDLINE_")}
    # ${...} variables are read by compose itself (which server images to run, which host
    # ports to publish on), not by Seedline.
    compose_variables = set(re.findall(r"\$\{([A-Z0-9_]+)", COMPOSE.read_text()))
    assert compose_variables == {"SEEDLINE_NATS_IMAGE", "SEEDLINE_POSTGRES_IMAGE",
                                 *HOST_PORT_VARIABLES}
    unknown = sorted(used - compose_variables - set(SETTINGS_DOC))
    assert not unknown, f"not in SETTINGS_DOC (libs/platform/.../settings.py): {unknown}"


HOST_PORT_VARIABLES = {"SEEDLINE_HOST_NATS_PORT", "SEEDLINE_HOST_NATS_MONITOR_PORT",
                       "SEEDLINE_HOST_POSTGRES_PORT", "SEEDLINE_HOST_WEB_PORT"}


def test_host_ports_default_to_the_ones_every_seedline_command_uses():
    published = {}
    for spec in compose()["services"].values():
        for port in spec.get("ports") or []:
            match = re.fullmatch(r"127\.0\.0\.1:\$\{(\w+):-(\d+)\}:(\d+)", port)
            assert match, f"{port}: published on 127.0.0.1, by a SEEDLINE_HOST_* variable"
            name, default, inside = match.groups()
            assert default == inside, port
            published[name] = int(default)
    assert published == {"SEEDLINE_HOST_NATS_PORT": 4222, "SEEDLINE_HOST_NATS_MONITOR_PORT": 8222,
                         "SEEDLINE_HOST_POSTGRES_PORT": 5432, "SEEDLINE_HOST_WEB_PORT": 8080}


def test_the_services_are_durable_restartable_and_checked():
    services = compose()["services"]
    for name in SERVICES:
        spec = services[name]
        env = spec["environment"]
        assert env["SEEDLINE_STRICT_DURABILITY"] == "1", name
        assert env["SEEDLINE_NATS_URL"] == "nats://nats:4222", name
        assert env["SEEDLINE_NATS_MONITOR_URL"] == "http://nats:8222", name
        assert env["SEEDLINE_DATABASE_URL"].startswith("postgresql://"), name
        assert "@postgres:5432/" in env["SEEDLINE_DATABASE_URL"], name
        # /readyz must answer from outside the container's loopback too (scrapes, probes).
        assert env["SEEDLINE_HTTP_HOST"] == "0.0.0.0", name
        assert spec["restart"] == "unless-stopped", name
        assert spec["healthcheck"]["test"] == ["CMD", "python", "/app/healthcheck.py"]
        assert spec["depends_on"]["nats"]["condition"] == "service_healthy", name
        assert spec["depends_on"]["postgres"]["condition"] == "service_healthy", name
    for name in INFRA:
        assert services[name]["restart"] == "unless-stopped"
        assert services[name]["healthcheck"]["test"][0] == "CMD"


def test_depends_on_names_defined_services_with_known_conditions():
    services = compose()["services"]
    for name, spec in services.items():
        for other, how in (spec.get("depends_on") or {}).items():
            assert other in services, f"{name} waits for {other}, which is not defined"
            assert how["condition"] in CONDITIONS, (name, other)
            if how["condition"] == "service_healthy":
                assert "healthcheck" in services[other], f"{other} has no health check"
            assert services[other].get("profiles") in (None, spec.get("profiles")), (name, other)


def test_nats_is_2_12_or_newer_and_runs_the_mounted_config():
    nats = compose()["services"]["nats"]
    assert nats["image"].startswith("${SEEDLINE_NATS_IMAGE:-")
    repo, _, tag = default_image(nats).partition(":")
    assert repo == "nats"
    major, minor = (int(p) for p in re.match(r"(\d+)\.(\d+)", tag).groups())
    assert (major, minor) >= (2, 12), nats["image"]
    # The health check's wget is busybox's in nats:*-alpine; the scratch image has none.
    assert tag.endswith("-alpine") and nats["healthcheck"]["test"][1] == "wget"
    mounts = dict(v.split(":")[:2] for v in nats["volumes"])
    assert mounts["./deploy/nats.conf"] == nats["command"][nats["command"].index("-c") + 1]
    ports = {p.rsplit(":", 1)[1] for p in nats["ports"]}
    assert {"4222", "8222"} <= ports, "the monitoring port carries the durability check"


def test_postgres_16_serves_the_database_the_services_use():
    services = compose()["services"]
    pg = services["postgres"]
    assert pg["image"] == "${SEEDLINE_POSTGRES_IMAGE:-postgres:16}"
    assert default_image(pg) == "postgres:16"
    env = pg["environment"]
    url = f"postgresql://{env['POSTGRES_USER']}:{env['POSTGRES_PASSWORD']}@postgres:5432/"
    url += env["POSTGRES_DB"]
    for name in SERVICES:
        assert services[name]["environment"]["SEEDLINE_DATABASE_URL"] == url


# -- Dockerfile --------------------------------------------------------------------------


def test_the_dockerfile_builds_with_uv_and_runs_slim_and_unprivileged():
    instructions = dockerfile_instructions()
    froms = [i for i in instructions if i.startswith("FROM ")]
    assert [f.split()[-1] for f in froms] == ["uv", "builder", "runtime"]
    assert "ARG PYTHON_IMAGE=python:3.11-slim" in instructions
    assert "ARG SERVICE" in instructions and "ARG PACKAGE=${SERVICE}" in instructions
    # The venv is made for the runtime image's interpreter; python:3.11-slim's by default.
    assert "ARG PYTHON=/usr/local/bin/python3.11" in instructions
    assert any(i.startswith("ENV ") and "UV_PYTHON=${PYTHON}" in i for i in instructions)
    syncs = [i for i in instructions if "uv sync" in i]
    assert len(syncs) == 1
    assert all(f in syncs[0] for f in ("--frozen", "--no-dev", '--package "${PACKAGE}"'))
    runtime = instructions[instructions.index(froms[-1]) :]
    user = [i for i in runtime if i.startswith("USER ")]
    assert user and user[-1] not in ("USER root", "USER 0")
    assert any(i.startswith("COPY --from=builder /app/.venv ") for i in runtime)
    assert runtime[-1] == 'CMD ["/bin/sh", "-c", "exec \\"$SERVICE\\""]'


def test_everything_the_dockerfile_copies_exists_and_is_not_ignored():
    ignored = [
        line.strip()
        for line in (REPO / "deploy" / "Dockerfile.dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    for instruction in dockerfile_instructions():
        if not instruction.startswith("COPY ") or "--from=" in instruction:
            continue
        for source in instruction.split()[1:-1]:
            assert (REPO / source).exists(), instruction
            assert not any(Path(source).match(p.removeprefix("**/")) for p in ignored), source


# -- deploy/nats.conf on a real nats-server ---------------------------------------------


def test_nats_conf_asks_for_jetstream_with_sync_always():
    text = NATS_CONF.read_text()
    block = re.search(r"^jetstream\s*\{(.*?)^\}", text, re.MULTILINE | re.DOTALL)
    assert block, "deploy/nats.conf has no jetstream { } block"
    assert re.search(r"^\s*sync_interval:\s*always\s*$", block.group(1), re.MULTILINE)
    assert re.search(r"^http:\s*0\.0\.0\.0:8222\s*$", text, re.MULTILINE)


def _local_copy(tmp_path: Path, port: int, monitor_port: int) -> Path:
    """deploy/nats.conf with only its addresses and store folder moved."""
    text = NATS_CONF.read_text()
    for pattern, value in [
        (r"^listen:.*$", f"listen: 127.0.0.1:{port}"),
        (r"^http:.*$", f"http: 127.0.0.1:{monitor_port}"),
        (r"^(\s*)store_dir:.*$", rf'\g<1>store_dir: "{tmp_path / "jetstream"}"'),
    ]:
        text, count = re.subn(pattern, value, text, flags=re.MULTILINE)
        assert count == 1, f"deploy/nats.conf should have exactly one line matching {pattern}"
    path = tmp_path / "nats.conf"
    path.write_text(text)
    return path


def test_nats_conf_starts_a_server_that_fsyncs_every_write(tmp_path):
    port, monitor_port = free_port(), free_port()
    config = _local_copy(tmp_path, port, monitor_port)
    with open(tmp_path / "nats.log", "wb") as log:
        proc = subprocess.Popen(
            [nats_server_binary(), "-c", str(config)], stdout=log, stderr=subprocess.STDOUT
        )
    try:
        wait_for_port(monitor_port, proc=proc)
        url = f"http://127.0.0.1:{monitor_port}/varz"
        with urllib.request.urlopen(url, timeout=5) as resp:
            varz = json.load(resp)
    finally:
        proc.terminate()
        proc.wait(10)
    assert varz["jetstream"]["config"]["sync_always"] is True
    assert varz["jetstream"]["config"]["store_dir"].startswith(str(tmp_path))
    assert varz["server_name"] == "seedline-nats"
    assert varz["max_payload"] == 4 * 1024 * 1024


# -- the health check against a real service --------------------------------------------


def _health(*url: str, http_port: int | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "SEEDLINE_HTTP_PORT"}
    if http_port is not None:
        env["SEEDLINE_HTTP_PORT"] = str(http_port)
    return subprocess.run(
        [sys.executable, str(HEALTHCHECK), *url],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )


@pytest.mark.servers
async def test_the_health_check_passes_only_once_the_service_answers(settings):
    import asyncio
    import dataclasses

    from seedline_devtools.testing import running
    from seedline_timeline_writer.app import create_app

    port = free_port()
    before = await asyncio.to_thread(_health, http_port=port)
    assert before.returncode == 1
    assert f"cannot read http://127.0.0.1:{port}/readyz" in before.stdout

    async with running(create_app(dataclasses.replace(settings, http_port=port))):
        ready = await asyncio.to_thread(_health, http_port=port)
    assert ready.returncode == 0, ready.stdout
    assert ready.stdout.startswith("ready: ") and '"postgres": true' in ready.stdout


def test_the_health_check_names_the_checks_that_fail():
    import http.server
    import threading

    class NotReady(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (the standard library's name)
            body = json.dumps({"ok": False, "checks": {"started": True, "postgres": False}})
            self.send_response(503)
            self.end_headers()
            self.wfile.write(body.encode())

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), NotReady)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        result = _health(f"http://127.0.0.1:{server.server_port}/readyz")
    finally:
        server.shutdown()
    assert result.returncode == 1
    assert result.stdout.strip() == "not ready (503): failing checks: postgres"


def test_the_health_check_reads_port_9100_by_default():
    result = _health()
    if "cannot read" not in result.stdout:
        pytest.skip("something answers on port 9100 here")
    assert result.returncode == 1
    assert "http://127.0.0.1:9100/readyz" in result.stdout


# -- images hold what their code imports ----------------------------------------------------


def _modules(pyproject: Path) -> set[str]:
    """The top-level modules a workspace package's wheel ships (hatch `packages`)."""
    hatch = tomllib.loads(pyproject.read_text())["tool"]["hatch"]["build"]["targets"]["wheel"]
    return {Path(p).name for p in hatch["packages"]}


def MACHINE_PATH(src: Path, start: str = "seedline_cli.machine_cmd") -> set[str]:
    """The seedline_cli modules `seedline runner` imports, at the top of a module or in a
    function, from its command module on (and the root group's)."""
    local = re.compile(
        r"^\s*from\s+(\.[a-z_]*|seedline_cli\.[a-z_]+)\s+import\s+(\([^)]*\)|[A-Za-z_, ]+)",
        re.MULTILINE)
    seen: set[str] = set()
    todo = [start, "seedline_cli.main", "seedline_cli.__main__"]
    while todo:
        dotted = todo.pop()
        path = src.joinpath(*dotted.split(".")).with_suffix(".py")
        if dotted in seen or not path.exists():
            continue
        seen.add(dotted)
        for where, names in local.findall(path.read_text()):
            base = "seedline_cli" + where if where.startswith(".") else where
            base = base.rstrip(".")
            todo.append(base)
            todo += [f"{base}.{name.strip()}" for name in names.strip("()").split(",")
                     if name.strip()]
    return seen


def test_every_workspace_module_an_image_imports_is_a_dependency_of_its_package():
    # `uv sync --package` installs a package and its declared dependencies only (the
    # development venv has every member), so an undeclared import fails only in an image.
    paths = {tomllib.loads(p.read_text())["project"]["name"]: p
             for p in sorted(REPO.glob("libs/*/pyproject.toml"))
             + sorted(REPO.glob("services/*/pyproject.toml"))}
    projects = packages()
    owner = {m: name for name, path in paths.items() for m in _modules(path)}

    def closure(name: str, seen: set[str]) -> set[str]:
        for dep in projects[name].get("dependencies") or []:
            dep = re.match(r"[A-Za-z0-9_.-]+", dep).group(0).lower()
            if dep in projects and dep not in seen:
                seen.add(dep)
                closure(dep, seen)
        return seen

    def command_modules(name: str) -> set[str]:
        """Its `seedline` commands: run only inside the `seedline` command, so they may import
        what its `cli` extra names."""
        points = (projects[name].get("entry-points") or {}).get("seedline.commands") or {}
        return {value.split(":")[0] for value in points.values()}

    importing = re.compile(r"^\s*(?:from|import)\s+([a-z_][a-z0-9_]*)", re.MULTILINE)
    top_level = re.compile(r"^(?:from|import)\s+([a-z_][a-z0-9_]*)", re.MULTILINE)
    for package in sorted({package for package, _, _ in built_processes().values()}):
        installed = closure(package, {package})
        optional = projects[package].get("optional-dependencies") or {}
        extras = optional.get("cli") or []
        with_cli = closure(package, installed | {e.split(">")[0] for e in extras})
        commands = command_modules(package)
        # seedline-cli alone is a runner machine's `seedline`: what `seedline runner`'s modules
        # import at their top must be installed (tests/test_machine_join.py runs it so); its
        # other commands, and what functions import when called, may need the `platform`
        # extra.
        machine = MACHINE_PATH if package == "seedline-cli" else None
        with_platform = closure(package, installed | {
            re.match(r"[A-Za-z0-9_.-]+", e).group(0) for e in optional.get("platform") or []})
        for source in sorted(paths[package].parent.glob("src/**/*.py")):
            dotted = ".".join(source.relative_to(paths[package].parent / "src").with_suffix("").parts)
            allowed = with_cli if dotted in commands else installed
            imports = importing
            if machine is not None:
                allowed = with_platform
                if dotted in machine(paths[package].parent / "src"):
                    allowed, imports = installed, top_level
            for module in set(imports.findall(source.read_text())) & set(owner):
                assert owner[module] in allowed, (
                    f"{source.relative_to(REPO)} imports {module}, but {package} does not "
                    f"depend on {owner[module]}: add it to {paths[package].relative_to(REPO)}"
                )


# -- slow: the image's install step, for real -------------------------------------------


def _uv() -> str:
    local = REPO / ".tools" / "bin" / "uv"
    found = str(local) if local.exists() else shutil.which("uv")
    if not found:
        pytest.skip("uv is not installed (make install bootstraps it into .tools)")
    return found


def _sync_argv(package: str) -> list[str]:
    """The Dockerfile's own `uv sync` line, for one package."""
    (line,) = [i for i in dockerfile_instructions() if "uv sync" in i]
    words = shlex.split(line[line.index("uv sync") :])
    return [w.replace("${PACKAGE}", package) for w in words[2:]]


@pytest.mark.slow
def test_the_image_install_step_puts_each_console_script_in_a_clean_venv(tmp_path):
    uv = _uv()
    started = time.monotonic()
    for name, (package, script, _argv) in sorted(built_processes().items()):
        venv = tmp_path / name
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("VIRTUAL_ENV", "UV_PROJECT_ENVIRONMENT")
        }
        env.update(
            UV_PROJECT_ENVIRONMENT=str(venv),
            UV_PYTHON=sys.executable,
            UV_PYTHON_DOWNLOADS="never",
            UV_NO_PROGRESS="1",
        )
        argv = [uv, "sync", *_sync_argv(package)]
        # The uv cache normally has everything; the index is the fallback.
        result = subprocess.run(
            [*argv, "--offline"], cwd=REPO, env=env, capture_output=True, text=True, timeout=300
        )
        if result.returncode != 0:
            result = subprocess.run(
                argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=300
            )
        assert result.returncode == 0, f"{' '.join(argv)}\n{result.stderr}"
        assert os.access(venv / "bin" / script, os.X_OK), f"{package} did not install {script}"
        installed = {
            p.name.split("-")[0].lower()
            for p in (venv / "lib").glob("python*/site-packages/*.dist-info")
        }
        assert "pytest" not in installed, f"{name}: dev dependencies reached the image"
        if name in SERVICES:
            assert "seedline_cli" not in installed, f"{name}: installs more than its own package"
        # Installed, not linked to the source tree: the runtime stage copies only the venv.
        code = (
            "import importlib, importlib.metadata as m; "
            f"(ep,) = m.entry_points(group='console_scripts', name={script!r}); "
            "ep.load(); print(importlib.import_module(ep.module).__file__)"
        )
        check = subprocess.run(
            [str(venv / "bin" / "python"), "-c", code], capture_output=True, text=True, timeout=120
        )
        assert check.returncode == 0, check.stderr
        assert check.stdout.strip().startswith(str(venv)), check.stdout
    assert time.monotonic() - started < 240
