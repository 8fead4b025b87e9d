"""The `toolnexus` command.

Exit codes: 0 success; 1 a manifest is invalid, the tool call failed (or was refused), or
`doctor` (or `validate --connect`) found an MCP server that does not start; 2 the command line
is wrong (unknown command, bad ARGS_JSON); 130 interrupted (Ctrl-C); 143 `watch` or `serve`
stopped by SIGTERM.
`main(argv)` returns the code instead of exiting, for tests.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import os
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from .base import Part, TextPart
from .console import ServerProgress, paint, server_row, table
from .errors import (
    ConfigError,
    InstallError,
    ManifestError,
    SourceError,
    StateUnavailable,
    ToolError,
    ToolnexusError,
)
from .install import CLIENTS

__all__ = ["CliError", "main"]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143


class CliError(ToolnexusError):
    """A failure the command reports as `Error: ...` plus a hint, with its exit code."""

    def __init__(self, message: str, *, hint: str | None = None, code: int = EXIT_FAILED) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.code = code

    def show(self, out: IO[str]) -> None:
        out.write(f"{paint('Error:', '31', out)} {self.message}\n")
        if self.hint:
            out.write(f"{self.hint}\n")


class _Version(argparse.Action):
    """`--version`: read from the installed metadata only when asked (pyproject.toml is the one
    place the version is written)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, help="print the version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
        from . import __version__

        sys.stdout.write(f"toolnexus {__version__}\n")
        parser.exit()


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="toolnexus",
        description="Turn a YAML manifest into tools an LLM agent can call.",
        epilog="Exit codes: 0 ok; 1 invalid manifest, failed or refused call, or an MCP server "
        "that does not start (doctor, validate --connect); 2 usage error; 130 interrupted; "
        "143 terminated (SIGTERM). "
        "Colour only on a terminal; NO_COLOR turns it off.",
    )
    parser.add_argument("--version", action=_Version)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("validate", help="check manifests and report every problem (file:line:col)")
    p.add_argument("files", nargs="+", type=Path, metavar="FILE")
    p.add_argument(
        "--connect",
        action="store_true",
        help="also start the MCP servers and report each one (state, skipped tools)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON report per file")

    p = sub.add_parser("list", help="list the tools of a manifest")
    p.add_argument("file", type=Path, metavar="FILE")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")

    p = sub.add_parser("call", help="call one tool and print its result")
    p.add_argument("file", type=Path, metavar="FILE")
    p.add_argument("tool", metavar="TOOL")
    p.add_argument("arguments", nargs="?", default="{}", metavar="ARGS_JSON")
    p.add_argument("--yes", "-y", action="store_true", help="approve calls that a rule marks ask")
    p.add_argument("--json", action="store_true", help="print the whole result as JSON")

    sub.add_parser("schema", help="print the manifest's JSON Schema")

    p = sub.add_parser("doctor", help="show what is installed and enforceable here")
    p.add_argument(
        "file",
        nargs="?",
        type=Path,
        metavar="FILE",
        help="also check that this manifest's MCP servers start",
    )
    p.add_argument(
        "--url",
        metavar="URL",
        help="also ask a running `toolnexus serve --http` at URL (its /healthz) how it is: "
        "state store, drain, reload watch",
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")

    p = sub.add_parser("watch", help="reload on every change and print what changed")
    p.add_argument("file", type=Path, metavar="FILE")

    p = sub.add_parser("serve", help="serve the toolkit as an MCP server (stdio by default)")
    p.add_argument("file", type=Path, metavar="FILE")
    p.add_argument(
        "--http", metavar="HOST:PORT", help="serve streamable HTTP (default host 127.0.0.1)"
    )
    p.add_argument(
        "--token",
        help="bearer token required from clients (default: $TOOLNEXUS_TOKEN; mandatory on a "
        "non-loopback address unless the manifest's serve.auth checks OAuth tokens, and refused "
        "together with it)",
    )
    p.add_argument("--watch", action="store_true", help="reload on change and notify clients")
    p.add_argument(
        "--stateless",
        action="store_true",
        help="stateless HTTP (no sessions): for several workers behind a balancer",
    )
    p.add_argument(
        "--workers",
        type=int,
        default=1,
        help="worker processes for stateless HTTP (implies --stateless)",
    )
    p.add_argument(
        "--grace",
        type=float,
        default=25.0,  # serve.drain.DEFAULT_GRACE, not imported: it would load the server here
        metavar="SECONDS",
        help="on SIGTERM, refuse new sessions and wait this long for calls in flight before "
        "shutting down (HTTP; a second signal stops at once)",
    )
    p.add_argument(
        "--approval-timeout",
        type=float,
        default=600.0,
        metavar="SECONDS",
        help="how long a client's user has to answer an approval question (default 600); "
        "set $TOOLNEXUS_APPROVAL_SECRET (32+ bytes) to share approvals between replicas",
    )
    p.add_argument(
        "--state",
        metavar="URL",
        help="where rate limits and the cache live, shared by every worker and replica: "
        "redis://HOST:PORT/DB (default: $TOOLNEXUS_STATE_URL, else each process alone)",
    )
    p.add_argument(
        "--metrics-public",
        action="store_true",
        help="serve GET /metrics (Prometheus) without the token or OAuth that /mcp needs: for "
        "a scraper on a network only it reaches",
    )
    p = sub.add_parser(
        "install",
        help="write the MCP server entry of a manifest into a client's config (Claude Code, "
        "Claude Desktop, Cursor, VS Code, Codex)",
    )
    p.add_argument("client", choices=CLIENTS, metavar="CLIENT", help=", ".join(CLIENTS))
    p.add_argument("file", type=Path, metavar="FILE")
    p.add_argument(
        "--http",
        metavar="URL",
        help="point at a served endpoint instead of running `serve` (stdio)",
    )
    p.add_argument(
        "--token-env",
        metavar="VAR",
        help="with --http: send `Authorization: Bearer` with the token read from this environment "
        "variable by the client (the token itself is never written)",
    )
    p.add_argument(
        "--name", help="the server's name (default: the manifest's name:, else the file's stem)"
    )
    p.add_argument("--config", type=Path, metavar="PATH", help="edit this file instead")
    p.add_argument(
        "--project",
        action="store_true",
        help="cursor, codex: the project's file (.cursor/mcp.json, .codex/config.toml)",
    )
    p.add_argument(
        "--force", action="store_true", help="replace an entry of the same name (backed up)"
    )
    p.add_argument("--dry-run", action="store_true", help="print the change, write nothing")
    p = sub.add_parser("completion", help="print a shell completion script (bash, zsh, fish)")
    p.add_argument(
        "shell", choices=("bash", "zsh", "fish"), metavar="SHELL", help="bash, zsh, fish"
    )
    for name, what in (("login", "log in to an OAuth MCP server"), ("logout", "forget a login")):
        p = sub.add_parser(
            name, help=f"{what} (in the user's token file, or the toolkit's shared state store)"
        )
        p.add_argument("server", metavar="SERVER", help="a name under mcp_servers:, or a URL")
        p.add_argument("-m", "--manifest", type=Path, default=Path("tools.yaml"), metavar="FILE")
        p.add_argument(
            "--state",
            metavar="URL",
            help="the shared state store whose toolkits use this login: redis://HOST:PORT/DB "
            "(default: the manifest's serve: {state: ...}, else $TOOLNEXUS_STATE_URL, else "
            "the user's token file; memory:// for the file)",
        )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits on --help and on usage errors
        return int(exc.code or 0)
    if not args.command:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        return _COMMANDS[args.command](args)
    except CliError as exc:
        exc.show(sys.stderr)
        return exc.code
    except ManifestError as exc:
        sys.stderr.write(f"{exc}\n")
        return EXIT_FAILED
    except SourceError as exc:
        CliError(str(exc), hint="Run `toolnexus doctor FILE` to check the servers.").show(
            sys.stderr
        )
        return EXIT_FAILED
    except ConfigError as exc:
        # A bad value the builder found outside the manifest checks (a builtin's options):
        # one line, not a traceback.
        CliError(str(exc), hint="Fix the manifest; `toolnexus validate FILE` checks it.").show(
            sys.stderr
        )
        return EXIT_FAILED
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (`toolnexus list x.yaml | head`): stop quietly, and keep Python
        # from complaining again when it flushes stdout at exit.
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_FAILED


def _cmd_validate(args: argparse.Namespace) -> int:
    from .adapters.strictness import not_strict, report
    from .build import check_manifest

    if args.json:
        return _validate_json(args)
    failed = 0
    for path in args.files:
        if not path.is_file():
            sys.stderr.write(f"{path}: no such file\n")
            failed += 1
            continue
        try:
            built, servers, pending = check_manifest(path)
            tools = len(built)
        except ManifestError as exc:
            for issue in exc.issues:
                sys.stderr.write(f"{issue}\n")
            failed += 1
        except ConfigError as exc:  # found by a builder, not located (a builtin's options)
            sys.stderr.write(f"{path}: {exc}\n")
            failed += 1
        else:
            ok = paint("ok", "32", sys.stdout)
            declared = _plural(tools, "tool")
            if servers and not args.connect:
                declared += f", {_plural(servers, 'MCP server')} (not started)"
            sys.stdout.write(f"{path}: {ok} ({declared})\n")
            report(not_strict(built), sys.stdout, indent="  ")
            if servers and args.connect:
                failed += not _connect_and_report(path, sys.stdout)
                continue
            for issue in pending:  # may name a tool of a server not started
                sys.stdout.write(f"  {paint('unchecked', '33', sys.stdout)} {issue}\n")
    if len(args.files) > 1:
        good = len(args.files) - failed
        sys.stdout.write(f"{len(args.files)} files checked: {good} ok, {failed} invalid\n")
    return EXIT_FAILED if failed else EXIT_OK


def _validate_json(args: argparse.Namespace) -> int:
    """`validate --json`: a JSON list with one report per file (`ok`, `issues` as strings,
    `tools`, `not_strict`; with `--connect`, `servers` and `meets_no_tool`)."""
    from .adapters.strictness import not_strict
    from .build import check_manifest
    from .toolkit import create_toolkit

    reports: list[dict[str, Any]] = []
    for path in args.files:
        report: dict[str, Any] = {"file": str(path), "ok": False, "issues": []}
        reports.append(report)
        if not path.is_file():
            report["issues"] = [f"{path}: no such file"]
            continue
        try:
            built, _, pending = check_manifest(path)
        except ManifestError as exc:
            report["issues"] = [str(issue) for issue in exc.issues]
            continue
        except ConfigError as exc:
            report["issues"] = [f"{path}: {exc}"]
            continue
        report.update(
            ok=True,
            tools=[t.name for t in built],
            not_strict=not_strict(built),
            unchecked=[str(issue) for issue in pending],
        )
        if not args.connect:
            continue
        try:
            toolkit = create_toolkit(path)
        except SourceError as exc:
            report.update(ok=False, issues=[str(exc)])
            continue
        with toolkit:
            servers = [v for v in toolkit.status().values() if isinstance(v, dict)]
            meets_no_tool = [str(w) for w in toolkit.warnings()]
            report.update(tools=toolkit.names(), servers=servers, meets_no_tool=meets_no_tool)
        ready = all(s.get("state") == "ready" and not s.get("login") for s in servers)
        report["ok"] = ready and not meets_no_tool
    json.dump(reports, sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")
    return EXIT_OK if all(r["ok"] for r in reports) else EXIT_FAILED


def _connect_and_report(path: Path, out: Any) -> bool:
    """Start the manifest's MCP servers and report each, then (on stderr) every rule, include
    filter and override that still meets no tool, an error now that the servers' tools are
    known; False if a server did not start or something meets nothing."""
    from .toolkit import create_toolkit

    progress = ServerProgress(out)
    try:
        with progress.attached():
            toolkit = create_toolkit(path)
    except SourceError as exc:  # a required server did not start
        out.write(f"{path}: {paint('failed', '31', out)}  {exc}\n")
        return False
    with toolkit:
        good = _report_servers(toolkit.status(), out, shown=progress.shown)
        problems = toolkit.warnings()
    for issue in problems:
        sys.stderr.write(f"{issue}\n")
    return good and not problems


def _report_servers(
    status: dict[str, Any], out: Any, *, shown: dict[str, dict[str, Any]] | None = None
) -> bool:
    """One row per MCP server (state, start time, tool count or reason) not already shown as
    it finished, then one line per skipped tool; False if a server is not ready."""
    good_all = True
    rows: list[list[str]] = []
    skipped: list[str] = []
    for info in status.values():
        if not isinstance(info, dict):
            continue
        cells, good = server_row(info, out)
        good_all = good_all and good
        if shown is None or info.get("name") not in shown:
            rows.append(cells)
        for tool in info.get("skipped") or ():
            mark = paint("skipped", "33", out)
            skipped.append(f"      {mark} {tool['tool']!r}: {tool['reason']}\n")
    table(rows, out, indent="  ")
    out.writelines(skipped)
    return good_all


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _flags(tool: Any) -> list[str]:
    """MCP annotation semantics: `destructive` and `idempotent` only mean something for a tool
    that writes, so a read-only tool shows `read-only` alone."""
    labels = ["read-only"] if tool.read_only else []
    if not tool.read_only:
        labels += ["destructive"] if tool.destructive else []
        labels += ["idempotent"] if tool.idempotent else []
    labels += ["open-world"] if tool.open_world else []
    labels += ["concurrent"] if tool.concurrent else []
    return labels


def _describe_approval(tool: Any) -> str:
    from ._attach import policy_summary

    policy = tool.approval
    if policy is None:
        return "default"
    return policy_summary(policy)


def _describe_sandbox(tool: Any) -> str:
    policy = tool.sandbox
    if policy is None:
        return "-"
    net = policy.network
    network = "net" if net is True else ("no-net" if net is False else "net:" + ",".join(net))
    return f"{policy.filesystem},{network}"


def _cmd_list(args: argparse.Namespace) -> int:
    from .adapters.strictness import not_strict, report
    from .toolkit import create_toolkit

    _require_file(args.file)
    with create_toolkit(args.file) as toolkit:
        tools = toolkit.tools()
        loose = not_strict(tools)
        rows = [
            {
                "name": t.name,
                "source": t.source,
                "flags": _flags(t),
                "approval": _describe_approval(t),
                "sandbox": _describe_sandbox(t),
                "description": t.description.split("\n", 1)[0],
                "strict": t.name not in loose,
                "not_strict_because": loose.get(t.name),
            }
            for t in tools
        ]
        status = toolkit.status()
    if args.json:
        json.dump({"tools": rows, "status": status}, sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
        return EXIT_OK
    columns = ["name", "source", "flags", "approval", "sandbox"]
    cells = [[",".join(r[c]) or "-" if c == "flags" else str(r[c]) for c in columns] for r in rows]
    table(cells, sys.stdout, header=columns)
    report(loose, sys.stderr)
    for name, info in status.items():
        if not isinstance(info, dict):
            continue
        if info.get("state") != "ready":
            sys.stderr.write(
                f"warning: MCP server {name!r} is {info.get('state')}: {info.get('reason')}\n"
            )
        for skipped in info.get("skipped") or ():
            sys.stderr.write(
                f"warning: MCP server {name!r} skipped tool {skipped['tool']!r}: "
                f"{skipped['reason']}\n"
            )
    return EXIT_OK


def _terminal_approver(assume_yes: bool) -> Any:
    from .approval import ApprovalRequest

    def approve(request: ApprovalRequest) -> bool:
        rule = request.verdict.describe()
        if assume_yes:
            sys.stderr.write(f"approved by --yes: {request.tool.name} ({rule})\n")
            return True
        if not sys.stdin.isatty():
            # The refusal's reason is what the result says: nobody declined, nobody was asked.
            raise ToolError("there is no terminal to ask; pass --yes to approve")
        args_text = json.dumps(dict(request.arguments), ensure_ascii=False)
        sys.stderr.write(f"Allow {request.tool.name}({args_text})?\n  {rule}\n[y/N] ")
        sys.stderr.flush()
        return sys.stdin.readline().strip().lower() in ("y", "yes")

    return approve


def _cmd_call(args: argparse.Namespace) -> int:
    from .toolkit import create_toolkit

    _require_file(args.file)
    hint = 'Quote it for your shell, e.g. \'{"path": "README.md"}\''
    try:
        arguments = json.loads(args.arguments)
    except json.JSONDecodeError as exc:
        raise CliError(
            f"ARGS_JSON is not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})",
            hint=hint,
            code=EXIT_USAGE,
        ) from None
    if not isinstance(arguments, dict):
        raise CliError(
            f"ARGS_JSON must be a JSON object of arguments, got {type(arguments).__name__}",
            hint=hint,
            code=EXIT_USAGE,
        )
    with create_toolkit(args.file, approver=_terminal_approver(args.yes)) as toolkit:
        result = toolkit.execute(args.tool, args.arguments)
    if args.json:
        payload = {
            "content": result.content,
            "structured": result.structured,
            "is_error": result.is_error,
            "parts": [_part_json(p) for p in result.parts],
            "metadata": {k: v for k, v in result.metadata.items() if k != "traceback"},
        }
        json.dump(payload, sys.stdout, indent=2, default=str, ensure_ascii=False)
        sys.stdout.write("\n")
    else:
        stream = sys.stderr if result.is_error else sys.stdout
        stream.write(result.content + ("\n" if not result.content.endswith("\n") else ""))
        for part in result.parts:  # in the tool's order: later text where it was sent
            if isinstance(part, TextPart):
                stream.write(part.text + ("\n" if not part.text.endswith("\n") else ""))
            else:
                stream.write(f"[{type(part).__name__} {part.mime_type}]\n")
    return EXIT_FAILED if result.is_error else EXIT_OK


def _part_json(part: Part) -> dict[str, Any]:
    if isinstance(part, TextPart):
        return {"type": "TextPart", "text": part.text}
    return {"type": type(part).__name__, "mime_type": part.mime_type}


def _cmd_schema(args: argparse.Namespace) -> int:
    from .manifest import manifest_schema

    json.dump(manifest_schema(), sys.stdout, indent=2)
    sys.stdout.write("\n")
    return EXIT_OK


def _ripgrep() -> str | None:
    """The rg the builtin search tools would run (the one beside this Python first, as the
    `ripgrep` wheel installs it, then PATH), with its version; None if none runs."""
    import shutil
    import subprocess

    for candidate in (str(Path(sys.executable).parent / "rg"), shutil.which("rg")):
        if not candidate or not Path(candidate).is_file():
            continue
        try:
            run = subprocess.run(
                [candidate, "--version"], capture_output=True, text=True, timeout=10, check=False
            )
        except (OSError, subprocess.SubprocessError):
            continue
        if run.returncode == 0 and run.stdout.startswith("ripgrep"):
            return f"{run.stdout.splitlines()[0]} ({candidate})"
    return None


@dataclass(frozen=True, kw_only=True)
class _Check:
    """One row of `doctor`: what was checked, how it stands, and what it means or what to do."""

    name: str
    state: str
    """`ok`, `missing`, or a value (the Python version, the best sandbox mechanism)."""
    detail: str = ""


def _doctor_checks() -> list[_Check]:
    """What is installed and enforceable here, one row per thing a user may have to fix."""
    from .mcp.tokens import TokenStore
    from .runtime.sandbox import detect

    checks = [_Check(name="python", state=sys.version.split()[0], detail=sys.executable)]
    support = detect()
    checks.append(_Check(name="sandbox", state=str(support.best), detail="best mechanism"))
    for name, mech in (("bwrap", support.bwrap), ("landlock", support.landlock)):
        state = "ok" if mech.available else "missing"
        checks.append(_Check(name=f"  {name}", state=state, detail=mech.reason))
    from .runtime.resident import unavailable

    why = unavailable()
    if why is None:
        how = "resident launcher per toolkit and policy, forking per command"
        bwrap = (
            "; under bwrap: one resident bwrap per policy and set of binds, fresh namespaces "
            "per command"
            if support.best == "bwrap"
            else ""
        )
        checks.append(_Check(name="launch", state="ok", detail=how + bwrap))
    else:
        checks.append(_Check(name="launch", state="missing", detail=why))
    store = TokenStore()
    records = [store.get(url) or {} for url in store.servers()]
    logins = _plural(sum(1 for r in records if r.get("tokens")), "login")
    if expired := sum(1 for r in records if r.get("expired") and not r.get("tokens")):
        logins += f", {expired} expired"  # refresh refused: `toolnexus login` again
    checks.append(_Check(name="tokens", state=logins, detail=str(store.path)))
    rg = _ripgrep()
    fallback = "grep/glob use the pure-Python fallback; pip install 'toolnexus[builtin]'"
    checks.append(_Check(name="ripgrep", state="ok" if rg else "missing", detail=rg or fallback))
    for module, why in (("markdownify", "fetch: HTML to Markdown"), ("pathspec", ".gitignore")):
        try:
            __import__(module)
            checks.append(_Check(name=module, state="ok", detail=why))
        except ImportError:
            checks.append(
                _Check(
                    name=module,
                    state="missing",
                    detail=f"{why}: pip install 'toolnexus[builtin]'",
                )
            )
    return checks


def _cmd_doctor(args: argparse.Namespace) -> int:
    out = sys.stdout
    checks = _doctor_checks()
    if args.json:
        return _doctor_json(args, checks)
    colours = {"ok": "32", "missing": "33"}
    rows = [
        [c.name, paint(c.state, colours[c.state], out) if c.state in colours else c.state, c.detail]
        for c in checks
    ]
    table(rows, out)
    code = EXIT_OK if args.url is None or _report_health(args.url, out) else EXIT_FAILED
    if args.file is None:
        return code
    from .toolkit import create_toolkit

    _require_file(args.file)
    out.write(f"{args.file}:\n")
    out.flush()
    progress = ServerProgress(out)
    try:
        with progress.attached():
            toolkit = create_toolkit(args.file)
    except SourceError as exc:  # a required server did not start: that is the diagnosis
        out.write(f"{args.file}: {paint('failed', '31', out)}  {exc}\n")
        return EXIT_FAILED
    with toolkit:
        if not _report_servers(toolkit.status(), out, shown=progress.shown):
            code = EXIT_FAILED
        out.write(f"  {_plural(len(toolkit.tools()), 'tool')}\n")
        for issue in toolkit.warnings():
            out.write(f"  {paint('meets no tool', '31', out)}  {issue}\n")
            code = EXIT_FAILED
    return code


def _report_health(url: str, out: IO[str]) -> bool:
    """A running server's health and reload watch, as its `/healthz` tells; False when it is
    not healthy or its watch is lost."""
    from .serve.health import read_health

    health = read_health(url)
    shown = paint(health.status, "32" if health.status == "ok" else "31", out)
    seen = f"generation {health.generation}" if health.generation is not None else health.detail
    out.write(f"server      {health.url}: {shown}  {seen}\n")
    if health.watch == "lost":
        files = _plural(health.missing, "watched file")
        out.write(
            f"  watch     {paint('lost', '31', out)}  {files} gone (the server's log names "
            "them); the last good tools keep serving, and the watch reloads when they are back\n"
        )
    elif health.watch is not None:
        out.write(f"  watch     {paint('ok', '32', out)}  watching the manifest's files\n")
    return health.healthy


def _doctor_json(args: argparse.Namespace, checks: list[_Check]) -> int:
    """`doctor --json`: the same checks, and the manifest's servers as `list --json` has them."""
    from .toolkit import create_toolkit

    payload: dict[str, Any] = {
        "checks": [{"name": c.name.strip(), "state": c.state, "detail": c.detail} for c in checks]
    }
    code = EXIT_OK
    if args.url is not None:
        from .serve.health import read_health

        health = read_health(args.url)
        payload["server"] = dataclasses.asdict(health)
        code = EXIT_OK if health.healthy else EXIT_FAILED
    if args.file is not None:
        _require_file(args.file)
        try:
            toolkit = create_toolkit(args.file)
        except SourceError as exc:
            payload["manifest"] = {"file": str(args.file), "error": str(exc)}
            code = EXIT_FAILED
        else:
            with toolkit:
                status = toolkit.status()
                servers = [v for v in status.values() if isinstance(v, dict)]
                warnings = [str(w) for w in toolkit.warnings()]
                payload["manifest"] = {
                    "file": str(args.file),
                    "tools": len(toolkit.tools()),
                    "servers": servers,
                    "meets_no_tool": warnings,
                }
            ready = all(s.get("state") == "ready" and not s.get("login") for s in servers)
            if not ready or warnings:
                code = EXIT_FAILED
    json.dump(payload, sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")
    return code


def _cmd_watch(args: argparse.Namespace) -> int:
    from .reload import ReloadEvent
    from .toolkit import create_toolkit

    _require_file(args.file)

    def show(event: ReloadEvent) -> None:
        stream = sys.stderr if event.error else sys.stdout
        mark = paint("✗", "31", stream) if event.error else paint("✓", "32", stream)
        stream.write(f"{mark} {event.describe()}\n")
        watch = toolkit.watch_status()
        if watch is not None and watch["state"] == "lost":
            missing = ", ".join(watch["missing"])
            stream.write(f"  watching for {missing} to come back\n")
        stream.flush()

    with create_toolkit(args.file) as toolkit, _quiet("toolnexus.reload"):
        toolkit.on_reload.append(show)
        toolkit.watch()
        names = ", ".join(toolkit.names()) or "no tools"
        sys.stdout.write(
            f"watching {args.file}: generation {toolkit.generation}, {names}; Ctrl-C to stop\n"
        )
        sys.stdout.flush()
        try:
            return asyncio.run(_until_signal())
        except KeyboardInterrupt:  # not on the main thread: no signal handlers there
            return EXIT_INTERRUPTED


@contextlib.contextmanager
def _quiet(name: str) -> Iterator[None]:
    """Silence a logger whose messages the command already prints (restored afterwards, for
    in-process callers of `main`)."""
    import logging

    logger = logging.getLogger(name)
    before = logger.propagate
    handler = logging.NullHandler()
    logger.addHandler(handler)  # keeps logging's last-resort handler from printing
    logger.propagate = False
    try:
        yield
    finally:
        logger.propagate = before
        logger.removeHandler(handler)


async def _until_signal() -> int:
    """Wait for Ctrl-C or SIGTERM; the exit code tells which (so the toolkit closes cleanly
    and its MCP servers end with it)."""
    import signal

    loop = asyncio.get_running_loop()
    got: asyncio.Future[int] = loop.create_future()

    def stop(code: int) -> None:
        if not got.done():
            got.set_result(code)

    for sig, code in ((signal.SIGINT, EXIT_INTERRUPTED), (signal.SIGTERM, EXIT_TERMINATED)):
        # Off the main thread there are no signal handlers; Ctrl-C still interrupts.
        with contextlib.suppress(RuntimeError, ValueError):
            loop.add_signal_handler(sig, stop, code)
    return await got


def _cmd_serve(args: argparse.Namespace) -> int:
    from .serve.server import ServeOptions, serve

    _require_file(args.file)
    options = ServeOptions(
        manifest=args.file,
        http=args.http,
        token=args.token or os.environ.get("TOOLNEXUS_TOKEN"),
        watch=args.watch,
        stateless=args.stateless or args.workers > 1,
        workers=args.workers,
        grace=args.grace,
        approval_timeout=args.approval_timeout,
        state=args.state,
        metrics_public=args.metrics_public,
    )
    try:
        serve(options)
    except ValueError as exc:
        raise CliError(str(exc), code=EXIT_USAGE) from None
    return EXIT_OK


def _cmd_install(args: argparse.Namespace) -> int:
    from .build import check_manifest
    from .install import InstallRequest, install

    _require_file(args.file)
    check_manifest(args.file)  # what `validate` checks: an invalid manifest is not installed
    request = InstallRequest(
        client=args.client,
        manifest=args.file,
        http=args.http,
        token_env=args.token_env,
        name=args.name,
        config=args.config,
        project=args.project,
        force=args.force,
        dry_run=args.dry_run,
    )
    try:
        change = install(request)
    except InstallError as exc:
        raise CliError(
            exc.message, hint=exc.hint, code=EXIT_USAGE if exc.usage else EXIT_FAILED
        ) from None
    sys.stdout.write(change.describe())
    return EXIT_OK


def _cmd_login(args: argparse.Namespace) -> int:
    from .mcp.login import find_server, login, logout

    if not args.server.startswith(("http://", "https://")):
        _require_file(args.manifest)
    name, url, settings = find_server(args.manifest, args.server)
    state = args.state
    if state is None and not args.server.startswith(("http://", "https://")):
        from .manifest import load_manifest

        state = load_manifest(args.manifest).serve_state
    # Where the manifest's served toolkit reads its logins: its shared state store, if any.
    from .state import open_state, state_url_from_env

    backend = open_state(state or state_url_from_env())

    async def run() -> str:
        from .mcp.tokens import login_store_for

        store = login_store_for(backend)
        try:
            if args.command == "logout":
                return await logout(name, url, store=store)
            return await login(name, url, settings, out=sys.stdout, store=store)
        finally:
            await backend.aclose()

    try:
        said = asyncio.run(run())
    except StateUnavailable as exc:
        raise CliError(
            str(exc), hint="Start that Redis, or pass --state for another store."
        ) from None
    sys.stdout.write(said + "\n")
    return EXIT_OK


def _cmd_completion(args: argparse.Namespace) -> int:
    from .completion import completion_script

    sys.stdout.write(completion_script(args.shell, _parser()))
    return EXIT_OK


def _require_file(path: Path) -> None:
    if not path.exists():
        raise CliError(f"{path}: no such file", hint="Give the path of a manifest (tools.yaml).")


_COMMANDS = {
    "validate": _cmd_validate,
    "list": _cmd_list,
    "call": _cmd_call,
    "schema": _cmd_schema,
    "doctor": _cmd_doctor,
    "watch": _cmd_watch,
    "serve": _cmd_serve,
    "install": _cmd_install,
    "login": _cmd_login,
    "logout": _cmd_login,
    "completion": _cmd_completion,
}
