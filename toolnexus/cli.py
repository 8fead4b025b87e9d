"""The `toolnexus` command.

Exit codes: 0 success; 1 the manifest is invalid or the tool call failed; 2 the command line is
wrong; 130 interrupted. `main(argv)` returns the code instead of exiting, for tests.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from .errors import ManifestError, SourceError, ToolnexusError

__all__ = ["CliError", "main"]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


class CliError(ToolnexusError):
    """A failure the command reports as `Error: ...` plus a hint, with its exit code."""

    def __init__(self, message: str, *, hint: str | None = None, code: int = EXIT_FAILED) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.code = code

    def show(self, out: IO[str]) -> None:
        out.write(f"{_paint('Error:', '31', out)} {self.message}\n")
        if self.hint:
            out.write(f"{self.hint}\n")


def _paint(text: str, color: str, out: IO[str]) -> str:
    """Colour only on a terminal, and never when NO_COLOR is set."""
    if os.environ.get("NO_COLOR") or not getattr(out, "isatty", lambda: False)():
        return text
    return f"\x1b[{color}m{text}\x1b[0m"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="toolnexus",
        description="Turn a YAML manifest into tools an LLM agent can call.",
        epilog="Exit codes: 0 ok, 1 invalid manifest or failed call, 2 usage error, "
        "130 interrupted.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("validate", help="check manifests and report every problem (file:line:col)")
    p.add_argument("files", nargs="+", type=Path, metavar="FILE")

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

    p = sub.add_parser("watch", help="reload on every change and print what changed")
    p.add_argument("file", type=Path, metavar="FILE")

    p = sub.add_parser("serve", help="serve the toolkit as an MCP server (stdio by default)")
    p.add_argument("file", type=Path, metavar="FILE")
    p.add_argument(
        "--http", metavar="HOST:PORT", help="serve streamable HTTP (default host 127.0.0.1)"
    )
    p.add_argument(
        "--token",
        help="bearer token required from clients "
        "(default: $TOOLNEXUS_TOKEN; mandatory on a non-loopback address)",
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
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED


def _cmd_validate(args: argparse.Namespace) -> int:
    from .build import check_manifest

    failed = 0
    for path in args.files:
        if not path.exists():
            sys.stderr.write(f"{path}: no such file\n")
            failed += 1
            continue
        try:
            count = check_manifest(path)
        except ManifestError as exc:
            for issue in exc.issues:
                sys.stderr.write(f"{issue}\n")
            failed += 1
        else:
            sys.stdout.write(f"{path}: ok ({count} tools declared)\n")
    return EXIT_FAILED if failed else EXIT_OK


def _flags(tool: Any) -> str:
    names = [
        ("read_only", "ro"),
        ("destructive", "destructive"),
        ("idempotent", "idempotent"),
        ("open_world", "open-world"),
        ("concurrent", "concurrent"),
    ]
    return ",".join(label for attr, label in names if getattr(tool, attr))


def _describe_approval(tool: Any) -> str:
    policy = tool.approval
    if policy is None:
        return "default"
    describe = getattr(policy, "summary", None)
    return describe() if callable(describe) else type(policy).__name__


def _describe_sandbox(tool: Any) -> str:
    policy = tool.sandbox
    if policy is None:
        return "-"
    net = policy.network
    network = "net" if net is True else ("no-net" if net is False else "net:" + ",".join(net))
    return f"{policy.filesystem},{network}"


def _cmd_list(args: argparse.Namespace) -> int:
    from .toolkit import create_toolkit

    _require_file(args.file)
    with create_toolkit(args.file) as toolkit:
        tools = toolkit.tools()
        rows = [
            {
                "name": t.name,
                "source": t.source,
                "flags": _flags(t),
                "approval": _describe_approval(t),
                "sandbox": _describe_sandbox(t),
                "description": t.description.split("\n", 1)[0],
            }
            for t in tools
        ]
        status = toolkit.status()
    if args.json:
        json.dump({"tools": rows, "status": status}, sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
        return EXIT_OK
    columns = ["name", "source", "flags", "approval", "sandbox"]
    widths = {c: max([len(c)] + [len(str(r[c])) for r in rows]) for c in columns}
    header = "  ".join(c.upper().ljust(widths[c]) for c in columns)
    sys.stdout.write(_paint(header, "1", sys.stdout) + "\n")
    for r in rows:
        sys.stdout.write("  ".join(str(r[c]).ljust(widths[c]) for c in columns).rstrip() + "\n")
    for name, info in status.items():
        if isinstance(info, dict) and info.get("state") == "failed":
            sys.stderr.write(f"warning: MCP server {name!r} failed: {info.get('error')}\n")
    return EXIT_OK


def _terminal_approver(assume_yes: bool) -> Any:
    from .approval import ApprovalRequest

    def approve(request: ApprovalRequest) -> bool:
        rule = request.verdict.describe()
        if assume_yes:
            sys.stderr.write(f"approved by --yes: {request.tool.name} ({rule})\n")
            return True
        if not sys.stdin.isatty():
            sys.stderr.write(
                f"{request.tool.name} needs approval ({rule}) and there is no terminal to ask; "
                "pass --yes to approve\n"
            )
            return False
        args_text = json.dumps(dict(request.arguments), ensure_ascii=False)
        sys.stderr.write(f"Allow {request.tool.name}({args_text})?\n  {rule}\n[y/N] ")
        sys.stderr.flush()
        return sys.stdin.readline().strip().lower() in ("y", "yes")

    return approve


def _cmd_call(args: argparse.Namespace) -> int:
    from .toolkit import create_toolkit

    _require_file(args.file)
    try:
        json.loads(args.arguments)
    except json.JSONDecodeError as exc:
        raise CliError(
            f"ARGS_JSON is not valid JSON: {exc.msg}",
            hint='Quote it for your shell, e.g. \'{"path": "README.md"}\'',
            code=EXIT_USAGE,
        ) from None
    with create_toolkit(args.file, approver=_terminal_approver(args.yes)) as toolkit:
        result = toolkit.execute(args.tool, args.arguments)
    if args.json:
        payload = {
            "content": result.content,
            "structured": result.structured,
            "is_error": result.is_error,
            "parts": [{"type": type(p).__name__, "mime_type": p.mime_type} for p in result.parts],
            "metadata": {k: v for k, v in result.metadata.items() if k != "traceback"},
        }
        json.dump(payload, sys.stdout, indent=2, default=str, ensure_ascii=False)
        sys.stdout.write("\n")
    else:
        stream = sys.stderr if result.is_error else sys.stdout
        stream.write(result.content + ("\n" if not result.content.endswith("\n") else ""))
        for part in result.parts:
            stream.write(f"[{type(part).__name__} {part.mime_type}]\n")
    return EXIT_FAILED if result.is_error else EXIT_OK


def _cmd_schema(args: argparse.Namespace) -> int:
    from .manifest import manifest_schema

    json.dump(manifest_schema(), sys.stdout, indent=2)
    sys.stdout.write("\n")
    return EXIT_OK


def _cmd_doctor(args: argparse.Namespace) -> int:
    import shutil

    from .sandbox import detect

    out = sys.stdout
    ok = _paint("ok", "32", out)
    no = _paint("missing", "33", out)
    out.write(f"python {sys.version.split()[0]} ({sys.executable})\n")
    support = detect()
    out.write("sandbox mechanisms:\n")
    for mech in support.mechanisms:
        state = ok if mech.available else no
        out.write(f"  {mech.name:<10} {state}  {mech.detail}\n")
    rg = shutil.which("rg")
    out.write(f"ripgrep     {ok if rg else no}  {rg or 'grep/glob use the pure-Python fallback'}\n")
    for module, why in (("markdownify", "fetch: HTML to Markdown"), ("pathspec", ".gitignore")):
        try:
            __import__(module)
            out.write(f"{module:<11} {ok}  {why}\n")
        except ImportError:
            out.write(f"{module:<11} {no}  {why}: pip install 'toolnexus[builtin]'\n")
    code = EXIT_OK
    if args.file is not None:
        from .toolkit import create_toolkit

        _require_file(args.file)
        with create_toolkit(args.file) as toolkit:
            out.write(f"{args.file}: {len(toolkit.tools())} tools\n")
            for name, info in toolkit.status().items():
                state = info.get("state") if isinstance(info, dict) else info
                good = state == "ready"
                code = code if good else EXIT_FAILED
                detail = info.get("error") or f"{info.get('tools', 0)} tools"
                out.write(
                    f"  mcp {name:<12} {ok if good else _paint(str(state), '31', out)}  {detail}\n"
                )
    return code


def _cmd_watch(args: argparse.Namespace) -> int:
    from .reload import ReloadEvent
    from .toolkit import create_toolkit

    _require_file(args.file)

    def show(event: ReloadEvent) -> None:
        stream = sys.stderr if event.error else sys.stdout
        stream.write(event.describe() + "\n")
        stream.flush()

    with create_toolkit(args.file) as toolkit:
        toolkit.on_reload.append(show)
        toolkit.watch()
        sys.stdout.write(
            f"watching {args.file} ({len(toolkit.tools())} tools, generation "
            f"{toolkit.generation}); Ctrl-C to stop\n"
        )
        sys.stdout.flush()
        try:
            asyncio.run(_forever())
        except KeyboardInterrupt:
            return EXIT_INTERRUPTED
    return EXIT_OK


async def _forever() -> None:
    await asyncio.Event().wait()


def _cmd_serve(args: argparse.Namespace) -> int:
    from .serve import ServeOptions, serve

    _require_file(args.file)
    options = ServeOptions(
        manifest=args.file,
        http=args.http,
        token=args.token or os.environ.get("TOOLNEXUS_TOKEN"),
        watch=args.watch,
        stateless=args.stateless or args.workers > 1,
        workers=args.workers,
    )
    try:
        serve(options)
    except ValueError as exc:
        raise CliError(str(exc), code=EXIT_USAGE) from None
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
}
