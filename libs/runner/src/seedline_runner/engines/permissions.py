"""What each engine may do on this machine: a setting per engine, with a default that
works and stays in the conversation's checkout. Pure: builds arguments and sentences.

- Claude Code: its permission mode and the tools it may use without asking. The default
  (``acceptEdits``, and ``Bash``) lets it edit files in its working directory (the
  checkout) and run commands there; an edit outside the checkout still needs an
  approval that nobody can give in ``-p`` mode, so it is refused.
- Codex: its sandbox and approval policy. The default (``workspace-write``, ``never``)
  lets it edit the checkout and run commands confined by its sandbox to the checkout
  (and temporary files); what the sandbox refuses is refused, never asked.
- ACP agents: how this machine answers their permission requests (acp_config).

A refusal is told to the person in one sentence that names the setting that allows it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

# The modes Claude Code 2.1.332 accepts (`claude --help`).
CLAUDE_PERMISSION_MODES = ("acceptEdits", "auto", "bypassPermissions", "dontAsk", "manual",
                           "plan")
DEFAULT_CLAUDE_PERMISSION_MODE = "acceptEdits"
DEFAULT_CLAUDE_ALLOWED_TOOLS: tuple[str, ...] = ("Bash",)
CODEX_SANDBOXES = ("read-only", "workspace-write", "danger-full-access")
DEFAULT_CODEX_SANDBOX = "workspace-write"
CODEX_APPROVALS = ("untrusted", "on-failure", "on-request", "never")
DEFAULT_CODEX_APPROVAL = "never"


@dataclass(frozen=True)
class ClaudePermissions:
    mode: str = DEFAULT_CLAUDE_PERMISSION_MODE
    allowed_tools: tuple[str, ...] = DEFAULT_CLAUDE_ALLOWED_TOOLS

    def __post_init__(self) -> None:
        if self.mode not in CLAUDE_PERMISSION_MODES:
            raise ValueError(f"The Claude Code permission mode is one of "
                             f"{', '.join(CLAUDE_PERMISSION_MODES)}, not {self.mode!r}.")

    def args(self, given: Sequence[str] = ()) -> list[str]:
        """The CLI's arguments, less what the operator's own arguments (`given`,
        --claude-arg) already say: the CLI refuses an option given twice."""
        args = [] if _names(given, "--permission-mode", "--dangerously-skip-permissions") \
            else ["--permission-mode", self.mode]
        if self.allowed_tools and not _names(given, "--allowedTools", "--allowed-tools"):
            args += ["--allowedTools", ",".join(self.allowed_tools)]
        return args


@dataclass(frozen=True)
class CodexPermissions:
    sandbox: str = DEFAULT_CODEX_SANDBOX
    approval: str = DEFAULT_CODEX_APPROVAL

    def __post_init__(self) -> None:
        if self.sandbox not in CODEX_SANDBOXES:
            raise ValueError(f"The Codex sandbox is one of {', '.join(CODEX_SANDBOXES)}, "
                             f"not {self.sandbox!r}.")
        if self.approval not in CODEX_APPROVALS:
            raise ValueError(f"The Codex approval policy is one of "
                             f"{', '.join(CODEX_APPROVALS)}, not {self.approval!r}.")

    def args(self, given: Sequence[str] = ()) -> list[str]:
        """As ClaudePermissions.args (`given`: --codex-arg). They go before `resume` on
        the command line: `codex exec resume` refuses --sandbox after it."""
        bypass = _names(given, "--dangerously-bypass-approvals-and-sandbox")
        args = [] if bypass or _names(given, "--sandbox", "-s") else ["--sandbox", self.sandbox]
        if not bypass and not any("approval_policy" in arg for arg in given):
            args += ["-c", f'approval_policy="{self.approval}"']
        return args


def _names(given: Sequence[str], *options: str) -> bool:
    return any(arg == option or arg.startswith(option + "=") for arg in given
               for option in options)


def claude_refusal(tool: str, target: str | None) -> str:
    """One sentence for a tool call Claude Code was not allowed to make."""
    what = f"{tool} on {target}" if target else tool
    return (f"Claude Code was not allowed to use {what} on this machine; the runner's "
            f"--claude-allowed-tools {tool} setting (or --claude-permission-mode "
            "bypassPermissions) allows it.")


def codex_refusal(command: str, sandbox: str | None = None) -> str:
    within = f" (its sandbox is {sandbox})" if sandbox else ""
    return (f"Codex was not allowed to run {command!r} on this machine{within}; the runner's "
            "--codex-sandbox danger-full-access setting allows it.")


def acp_refusal(agent: str, what: str) -> str:
    return (f"{agent} was not allowed to {what} on this machine; the runner's "
            "--acp-permissions allow setting allows it.")


def tool_target(tool_input: object) -> str | None:
    """The file or command a refused tool call was about, when it names one."""
    if not isinstance(tool_input, dict):
        return None
    for key in ("file_path", "notebook_path", "path", "command"):
        value = tool_input.get(key)
        if isinstance(value, str) and value:
            return value if len(value) <= 200 else value[:199] + "…"
    return None


def parse_tools(value: str | Sequence[str]) -> tuple[str, ...]:
    """`Bash,Edit` (or a list of such) as tool names; empty: none."""
    items = [value] if isinstance(value, str) else list(value)
    return tuple(t.strip() for item in items for t in item.split(",") if t.strip())
