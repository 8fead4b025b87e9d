"""Shell tools: a manifest entry with `command:` becomes a tool that runs one program.

```yaml
- name: list_dir
  command: [ls, -la, "{long?-l}", "--", "{path}"]   # argv: an argument is one element
  cwd: "{dir?}"                                      # confined to the workspace
  env: {LANG: C, TARGET: "{path}"}                   # each value is one variable
  stdin: "{text?}"
  ok_exit_codes: [0, 1]
  max_output: 30000
  kill_grace: 2s                                     # SIGTERM, then SIGKILL this much later
- name: count_lines
  shell: true                                        # a script, run as: sh -c SCRIPT NAME ARGS...
  command: 'wc -l -- "$1" | tr -s " "'
  args: ["{path}"]                                   # reach the script as "$1", "$2"...
  env: {PATTERN: "{pattern}"}                        # or as "$PATTERN"
```

Placeholders follow `_template.py`: `{x}`, `{x?}` (leave the element out when absent),
`{x?--flag}` / `{x?--yes|--no}` (booleans), `{x...}` (one element per list item), `{{ }}`.
Every argument value ends up inside exactly the argv element (or variable) its placeholder is
in: no shell ever parses it, so `; rm -rf /`, `$(...)`, backticks, quotes and newlines are
plain text. A value starting with `-` is still one element, but the program may read it as an
option: put `--` before such positions when the program supports it. A NUL character cannot be
passed in argv or the environment: such a call is refused with an error the model can read.

With `shell: true`, `command` is a script that is never templated: arguments reach it only as
positional parameters (`args:`) and environment variables (`env:`), which the script should
quote ("$1", "$NAME"). A script that mentions `{param}` is refused at build time.

The result's content is stdout, then stderr under a `[stderr]` line, then `exit code N` when
the command failed; a command that exits with a code outside `ok_exit_codes` (default `[0]`) or
that timed out is an error result. `max_output` bounds each stream (head and tail are kept,
with a note of how many bytes were left out between them). Metadata: exit_code, duration,
truncated, timed_out, stopped, mechanism (the sandbox that confined it) and unconfined.

No process outlives its call (`toolnexus.runtime.process`): on timeout the command and everything it
started get SIGTERM, then SIGKILL `kill_grace` seconds later (default 2, also settable in
`defaults`); the call answers as soon as the command itself exits, and what it left running
in the background is stopped the same way, with a note saying how many processes were.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..base import Result, Tool, ToolContext
from ..errors import ConfigError, ToolError
from ..runtime.process import ProcessResult, run_process
from ..runtime.sandbox import SandboxPolicy, confine_path
from . import BuildContext
from ._template import (
    Parameters,
    Template,
    find_script_placeholders,
    label,
    parse_template,
    render_scalar,
)

__all__ = ["build_shell_tool"]

DEFAULT_TIMEOUT = 120.0
"""Seconds a command may run when neither the entry nor `defaults` set a timeout."""
DEFAULT_MAX_OUTPUT = 30_000
"""Bytes of each stream (stdout, stderr) kept, head and tail, when the entry does not say."""
DEFAULT_KILL_GRACE = 2.0
"""Seconds between SIGTERM and SIGKILL when neither the entry nor `defaults` set `kill_grace`."""
"""Bytes of each stream (stdout, stderr) kept, head and tail, when the entry does not say."""
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True, kw_only=True)
class _Command:
    """A compiled shell entry: everything a call needs, checked at build time."""

    name: str
    argv: tuple[Template, ...] = field(repr=False)
    """Like cwd, env and stdin, out of `repr` (error reporters print the locals of failing
    frames): the manifest may put `${TOKEN}` values in any of them."""
    cwd: Template | None = field(repr=False)
    env: tuple[tuple[str, Template], ...] = field(repr=False)
    stdin: Template | None = field(repr=False)
    ok_exit_codes: frozenset[int]
    timeout: float
    max_output: int
    kill_grace: float
    parameters: Parameters
    sandbox: SandboxPolicy | None

    async def run(self, arguments: Mapping[str, Any], ctx: ToolContext) -> Result:
        args = self.parameters.with_defaults(arguments)
        argv = [text for template in self.argv for text in template.render_each(args)]
        for index, element in enumerate(argv):
            _refuse_nul(element, f"argv element {index}")
        env: dict[str, str] = {}
        for key, template in self.env:
            value = template.render(args)
            if value is not None:
                env[key] = _refuse_nul(value, f"environment variable {key}")
        stdin = None
        if self.stdin is not None:
            text = self.stdin.render(args)
            stdin = None if text is None else text.encode()
        cwd = self._cwd(args, ctx)
        timeout = self.timeout
        remaining = ctx.remaining()
        if remaining is not None:
            timeout = min(timeout, remaining)
        sandbox = ctx.sandbox if ctx.sandbox is not None else self.sandbox
        done = await run_process(
            argv,
            cwd=cwd,
            env=env,
            stdin=stdin,
            timeout=timeout,
            max_output=self.max_output,
            sandbox=sandbox,
            workspace=ctx.workspace,
            kill_grace=self.kill_grace,
        )
        result = self._result(done, timeout)
        if result.is_error and sandbox is not None and done.stderr:
            # The command reports its own EACCES/EROFS; say when the sandbox is the cause.
            why = sandbox.explain_refusal(done.stderr, ctx.workspace)
            if why:
                result = replace(result, content=f"{result.content}\nnote: {why}")
        return result

    def _cwd(self, args: Mapping[str, Any], ctx: ToolContext) -> Path:
        if self.cwd is None:
            return ctx.workspace
        text = self.cwd.render(args)
        if text is None:
            return ctx.workspace
        _refuse_nul(text, "the working directory")
        # Confinement to the workspace (and extra roots) is checked here; the sandbox, if any,
        # decides separately what the command may touch once it runs.
        path = confine_path(text, workspace=ctx.workspace, roots=ctx.roots)
        if not path.is_dir():
            raise ToolError(f"working directory {text!r} is not an existing folder")
        return path

    def _result(self, done: ProcessResult, timeout: float) -> Result:
        parts: list[str] = []
        if done.stdout:
            parts.append(done.stdout.rstrip("\n"))
        if done.stderr:
            parts.append("[stderr]\n" + done.stderr.rstrip("\n"))
        failed = done.timed_out or done.exit_code not in self.ok_exit_codes
        if done.timed_out:
            parts.append(f"timed out after {timeout:g}s: the command and its children were killed")
        elif done.exit_code not in self.ok_exit_codes:
            parts.append(f"exit code {done.exit_code}")
        if done.stopped and not done.timed_out:
            many = done.stopped > 1
            parts.append(
                f"note: {done.stopped} background process{'es' if many else ''} "
                f"{'were' if many else 'was'} still running when the command exited and "
                f"{'were' if many else 'was'} stopped (no process outlives its tool call)"
            )
        return Result(
            content="\n".join(parts) if parts else "(no output)",
            is_error=failed,
            metadata={
                "exit_code": done.exit_code,
                "duration": done.duration,
                "truncated": done.truncated,
                "timed_out": done.timed_out,
                "stopped": done.stopped,
                "mechanism": done.mechanism,
                "launch": done.launch,
                "unconfined": done.unconfined,
            },
        )


def _refuse_nul(text: str, where: str) -> str:
    if "\0" in text:
        raise ToolError(
            f"{where} would contain a NUL character, which cannot be passed to a command; "
            "remove it from the arguments"
        )
    return text


def build_shell_tool(decl: Mapping[str, Any], ctx: BuildContext) -> Tool:
    """Build the tool of one `command:` manifest entry.

    Raises:
        ConfigError: a bad command, placeholder, variable name, exit code list or sandbox.
    """
    name = decl["name"]
    shell = decl.get("shell", False)
    command = decl.get("command")
    if shell:
        argv = _script_argv(command, decl.get("args"), name)
    else:
        if decl.get("args") is not None:
            raise ConfigError(
                "args is only for shell: true scripts; put the arguments in command",
                field="args",
            )
        argv = _argv(command)
    cwd = _template(decl.get("cwd"), "cwd")
    stdin = _template(decl.get("stdin"), "stdin")
    env = _env(decl.get("env"))
    templates = [*argv, *(t for _, t in env)]
    templates += [t for t in (cwd, stdin) if t is not None]
    parameters = decl.get("parameters")
    params = (
        Parameters.from_schema(parameters)
        if parameters is not None
        else Parameters.derive(templates)
    )
    for template in argv:
        params.check(template, spread="element")
    for template in templates[len(argv) :]:
        params.check(template)
    if shell:
        found = find_script_placeholders(str(command), params.properties)
        if found:
            raise ConfigError(
                f"the script mentions {', '.join(found)}, but a shell: true script is never "
                "templated (splicing arguments into shell text would let them run as code); "
                'pass the value with args: ["{...}"] and use "$1" in the script, or with '
                'env: {NAME: "{...}"} and use "$NAME"',
                field="command",
            )
    if ctx.sandbox is not None:
        ctx.sandbox.check_process()
    compiled = _Command(
        name=name,
        argv=tuple(argv),
        cwd=cwd,
        env=env,
        stdin=stdin,
        ok_exit_codes=_exit_codes(decl.get("ok_exit_codes")),
        timeout=_positive(ctx.timeout or DEFAULT_TIMEOUT, "timeout"),
        max_output=int(_positive(decl.get("max_output", DEFAULT_MAX_OUTPUT), "max_output")),
        kill_grace=_grace(decl.get("kill_grace", DEFAULT_KILL_GRACE)),
        parameters=params,
        sandbox=ctx.sandbox,
    )
    program = "sh" if shell else label(argv[0])
    return Tool(
        name=name,
        handler=compiled.run,
        description=decl.get("description") or _describe(argv, shell),
        parameters=params.schema,
        source="shell",
        title=decl.get("title"),
        read_only=decl.get("read_only", False),
        destructive=decl.get("destructive", True),
        idempotent=decl.get("idempotent", False),
        open_world=decl.get("open_world", True),
        concurrent=decl.get("concurrent", False),
        sandbox=ctx.sandbox,
        origin=ctx.origin,
        meta={"program": program, "shell": bool(shell)},
    )


def _argv(command: Any) -> list[Template]:
    if isinstance(command, str):
        raise ConfigError(
            "command is a string; give a list of argv elements ([git, status, '{path}']), or "
            "set shell: true to run it as a sh script",
            field="command",
        )
    if not isinstance(command, Sequence) or not command:
        raise ConfigError("command must be a non-empty list of argv elements", field="command")
    return [_element(item, f"command[{i}]") for i, item in enumerate(command)]


def _script_argv(script: Any, args: Any, name: str) -> list[Template]:
    if not isinstance(script, str) or not script.strip():
        raise ConfigError(
            "with shell: true, command must be the script text (a string)", field="command"
        )
    if args is not None and (isinstance(args, str) or not isinstance(args, Sequence)):
        raise ConfigError("args must be a list of templated strings", field="args")
    # sh -c SCRIPT NAME ARG...: NAME becomes $0 (used in the shell's own error messages).
    fixed = [Template.literal(text, field="command") for text in ("sh", "-c", script, name)]
    return fixed + [_element(item, f"args[{i}]") for i, item in enumerate(args or ())]


def _element(item: Any, field: str) -> Template:
    if isinstance(item, str):
        return parse_template(item, field=field)
    if isinstance(item, bool | int | float):
        return Template.literal(render_scalar(item), field=field)
    raise ConfigError(f"argv elements must be strings, not {type(item).__name__}", field=field)


def _template(value: Any, field: str) -> Template | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ConfigError(f"{field} must be a string (a template)", field=field)
    return parse_template(value, field=field)


def _env(value: Any) -> tuple[tuple[str, Template], ...]:
    if value is None:
        return ()
    if not isinstance(value, Mapping):
        raise ConfigError("env must be a mapping of variable names to values", field="env")
    env: list[tuple[str, Template]] = []
    for key, item in value.items():
        if not isinstance(key, str) or not _ENV_NAME.fullmatch(key):
            raise ConfigError(
                f"{key!r} is not a valid variable name (letters, digits and _, not starting "
                "with a digit)",
                field=f"env.{key}",
            )
        env.append((key, _element(item, f"env.{key}")))
    return tuple(env)


def _exit_codes(value: Any) -> frozenset[int]:
    if value is None:
        return frozenset({0})
    if isinstance(value, str) or not isinstance(value, Sequence) or not value:
        raise ConfigError(
            "ok_exit_codes must be a non-empty list of integers", field="ok_exit_codes"
        )
    codes = set()
    for item in value:
        if isinstance(item, bool) or not isinstance(item, int):
            raise ConfigError(
                f"ok_exit_codes holds {item!r}; exit codes are integers", field="ok_exit_codes"
            )
        codes.add(item)
    return frozenset(codes)


def _positive(value: Any, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ConfigError(f"expected a positive number, not {value!r}", field=field)
    return float(value)


def _grace(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise ConfigError(
            f"kill_grace must be a duration of zero or more seconds, not {value!r}",
            field="kill_grace",
        )
    return float(value)


def _describe(argv: Sequence[Template], shell: bool) -> str:
    if shell:
        return "Run a shell script."
    return "Run: " + " ".join(label(t) for t in argv)
