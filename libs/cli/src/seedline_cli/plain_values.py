"""Text options and flags take their value as given, without pydantic.

Typer (0.29) checks every value it parses with a pydantic validator that it builds on first
use, and importing pydantic costs a command's start-up about 0.2 s: most of `seedline
status`'s, whose only option is a flag. Text has nothing to check, and a flag's value is
already a bool, or None when it is not given (the help option's too). Values that need a
conversion (numbers, paths, lists, a flag read from an environment variable, where "1"
means true) keep Typer's own validator.

tests/test_cli_startup.py tells when a newer Typer no longer goes this way: `seedline
status` then imports pydantic again.
"""

from __future__ import annotations

from typing import Any


def install() -> None:
    from typer import core
    from typer._coercion import PassThroughRuntimeParam

    parameter = getattr(core, "_TyperParameter", None)
    builds = getattr(parameter, "get_runtime_param", None)
    if builds is None or getattr(builds, "plain", False):
        return

    def get_runtime_param(self: Any) -> Any:
        if self._runtime_param is None and _plain(self):
            described = self.type_descriptor
            self._runtime_param = PassThroughRuntimeParam(
                annotation=described.annotation, parameter_info=described.parameter_info)
        return builds(self)

    get_runtime_param.plain = True  # type: ignore[attr-defined]
    parameter.get_runtime_param = get_runtime_param


def _plain(param: Any) -> bool:
    annotation = param.type_descriptor.annotation
    single = param.nargs == 1 and not param.multiple
    if annotation is str:
        return single
    return annotation is bool and single and not getattr(param, "envvar", None)
