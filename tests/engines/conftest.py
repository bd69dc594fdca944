"""The real engine CLIs against local stand-ins of their model APIs, with no network.

`make engines` (a prerequisite of `make test`) installs the pinned CLIs with npm into
.tools/engines; SEEDLINE_CLAUDE_BIN / SEEDLINE_CODEX_BIN point elsewhere. Without
them every test here is skipped, for one reason, reported once.

Each CLI gets a home, config folder and transcript folder of its own under the test's
temporary folder, and a proxy that leads nowhere for everything but 127.0.0.1: a CLI
that tried to reach the internet would fail, not quietly succeed.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from seedline_runner.engines.base import EngineOutput

REPO_ROOT = Path(__file__).resolve().parents[2]
ENGINE_BIN = REPO_ROOT / ".tools" / "engines" / "node_modules" / ".bin"
SKIP_REASON = (
    "the real engine CLIs are not installed (npm not found?): `make engines` installs "
    "claude and codex into .tools/engines"
)
REPO = "apps/chess-academy"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(
        f"seedline_engine_standins.{name}", Path(__file__).with_name(f"{name}.py")
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


anthropic_standin = _load("anthropic_standin")
responses_standin = _load("responses_standin")
cli_env = _load("cli_env")
base_env = cli_env.base_env


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    # Every test skipped for want of the CLIs is folded into one line of the summary,
    # instead of one line per test.
    report = (yield).get_result()
    longrepr = report.longrepr
    if report.skipped and isinstance(longrepr, tuple) and longrepr[2].endswith(SKIP_REASON):
        report.longrepr = (str(Path(__file__).relative_to(REPO_ROOT)), 0, longrepr[2])


def engine_cli(name: str) -> Path:
    configured = os.environ.get(f"SEEDLINE_{name.upper()}_BIN")
    path = Path(configured) if configured else ENGINE_BIN / name
    if not (path.is_file() and os.access(path, os.X_OK)):
        pytest.skip(SKIP_REASON)
    return path


class Emitted(list):
    """An engine's ``emit`` callback that keeps what it was given, in order."""

    async def __call__(self, output: EngineOutput) -> None:
        self.append(output)

    def kinds(self) -> list[str]:
        return [output.kind for output in self]


@pytest.fixture
def emitted() -> Callable[[], Emitted]:
    return Emitted


@pytest.fixture
def checkouts(tmp_path: Path) -> Path:
    """A repos folder holding a checkout of REPO."""
    folder = tmp_path / "repos"
    (folder / REPO).mkdir(parents=True)
    return folder


# Claude Code ------------------------------------------------------------------


@dataclass
class ClaudeSetup:
    executable: Path
    standin: object
    home: Path
    env: dict[str, str]

    def transcripts(self) -> list[Path]:
        return sorted((self.home / "projects").glob("*/*.jsonl"))

    def transcript_ids(self) -> list[str]:
        """The entry ids an import of the one transcript gives its records (read as a
        transcript written by hand: an import skips what a runner ran). Claude Code writes
        the file a moment after its output, so a test that kills it waits for these."""
        from seedline_cli.transcripts import claude as claude_transcript

        paths = self.transcripts()
        if len(paths) != 1:
            return []
        by_hand = [line.replace('"entrypoint":"seedline-runner"', '"entrypoint":"cli"')
                   for line in paths[0].read_text().splitlines()]
        return [item.entry_id for item in claude_transcript.parse(enumerate(by_hand, 1)).items]


@pytest.fixture
def anthropic() -> Iterator[object]:
    standin = anthropic_standin.AnthropicStandIn().start()
    try:
        yield standin
    finally:
        standin.stop()


@pytest.fixture
def claude(tmp_path: Path, anthropic) -> ClaudeSetup:
    executable = engine_cli("claude")
    home = tmp_path / "claude-config"
    env = cli_env.claude_env(tmp_path / "claude-home", home, anthropic.base_url)
    return ClaudeSetup(executable=executable, standin=anthropic, home=home, env=env)


# Codex --------------------------------------------------------------------------


@dataclass
class CodexSetup:
    executable: Path
    standin: object
    home: Path
    env: dict[str, str]

    def rollouts(self) -> list[Path]:
        return sorted((self.home / "sessions").glob("*/*/*/rollout-*.jsonl"))


CODEX_CONFIG = """\
model = "stand-in-model"
model_provider = "standin"

[model_providers.standin]
name = "stand-in"
base_url = "{base_url}"
env_key = "STANDIN_API_KEY"
wire_api = "responses"
"""


@pytest.fixture
def responses() -> Iterator[object]:
    standin = responses_standin.ResponsesStandIn().start()
    try:
        yield standin
    finally:
        standin.stop()


@pytest.fixture
def codex(tmp_path: Path, responses) -> CodexSetup:
    executable = engine_cli("codex")
    home = tmp_path / "codex-home"
    home.mkdir()
    (home / "config.toml").write_text(CODEX_CONFIG.format(base_url=responses.base_url))
    env = base_env(tmp_path / "codex-user") | {
        "CODEX_HOME": str(home),
        "STANDIN_API_KEY": "sk-stand-in",
    }
    return CodexSetup(executable=executable, standin=responses, home=home, env=env)


@pytest.fixture
async def nc(nats_server):
    """A client with a stream that takes what a runner publishes, as the platform's ingest
    stream would."""
    import nats

    client = await nats.connect(nats_server.url)
    await client.jetstream().add_stream(name="OBSERVED_INGEST", subjects=["seedline.ingest.>"])
    yield client
    await client.close()
