"""Finding included manifests, and what an include chain does to the names of its tools.

An include reference is one of:

- `path/to/file.yaml`: relative to the including manifest's folder (`~` expands);
- `package:pkg.name/path/in/package.yaml`: a resource of an installed package
  (`importlib.resources`), so a team can ship a vetted tool set as a wheel;
- `toolset:NAME`: an entry point in the group `toolnexus.toolsets`. The object it names may be
  a path (str or `os.PathLike`; relative to the entry point's module folder), a mapping (the
  manifest itself), a callable taking no arguments that returns either, or a module with a
  `MANIFEST` attribute (path or mapping) or a `manifest()` function. A mapping's relative paths
  (python modules, OpenAPI files) resolve against the entry point's module folder.
"""

from __future__ import annotations

import fnmatch
import os
import sys
import types
from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._suggest import did_you_mean
from ..errors import ToolnexusError
from .model import IncludeDecl, Location, OverrideDecl

__all__ = ["TOOLSET_GROUP", "IncludeProblem", "ResolvedInclude", "apply_include_chain"]

TOOLSET_GROUP = "toolnexus.toolsets"


class IncludeProblem(ToolnexusError):
    """An include cannot be resolved; the message says what was looked for and how to fix it."""


@dataclass(frozen=True, kw_only=True)
class ResolvedInclude:
    """What an include reference points at."""

    label: str
    """For messages and chains: the path as the user would write it, or `toolset:NAME`."""
    key: str
    """Identity for cycle detection (a real path, or the reference)."""
    base_dir: Path
    """Folder relative paths inside it resolve against."""
    file: Path | None = None
    """The manifest file, as displayed (None for a mapping or a zipped resource)."""
    watch: Path | None = None
    """Absolute path to watch for changes, if it is a file on disk."""
    text: str | None = None
    data: Mapping[str, Any] | None = None


def apply_include_chain(
    chain: Sequence[IncludeDecl],
    name: str,
    seen: MutableMapping[Location, set[str]] | None = None,
) -> tuple[str, tuple[OverrideDecl, ...]] | None:
    """The final name of a tool named `name` in the innermost included file, and the overrides
    that apply to it; None if an `only`/`exclude` of the chain drops it.

    Each include's globs match names as its included file sees them (before its own prefix),
    from the innermost include outwards. Builders call this for tools named at build time
    (OpenAPI operations, python factories, MCP server tools); the loader for named tools.
    `seen` collects, per include (by where it is written), the names its filters met: an
    `only`, `exclude` or `override` entry that met none is a mistake the builder reports.
    """
    overrides: list[OverrideDecl] = []
    for step in reversed(chain):
        if seen is not None:
            seen.setdefault(step.where, set()).add(name)
        if step.only and not any(fnmatch.fnmatchcase(name, g) for g in step.only):
            return None
        if any(fnmatch.fnmatchcase(name, g) for g in step.exclude):
            return None
        overrides += [o for o in step.overrides if fnmatch.fnmatchcase(name, o.glob)]
        name = step.prefix + name
    return name, tuple(overrides)


def resolve_include(ref: str, base_dir: Path, display_dir: Path | None) -> ResolvedInclude:
    """Find what `ref` names. `display_dir` is the including file's folder as displayed.

    Raises:
        IncludeProblem: not found, not installed, or failed to load.
    """
    if ref.startswith("package:"):
        return _package(ref)
    if ref.startswith("toolset:"):
        return _toolset(ref)
    path = Path(ref).expanduser()
    shown = path if path.is_absolute() or display_dir is None else display_dir / path
    real = path if path.is_absolute() else base_dir / path
    text = _read(real, shown)
    return ResolvedInclude(
        label=_label(shown),
        key=os.path.realpath(real),
        base_dir=Path(os.path.abspath(real.parent)),
        file=shown,
        watch=Path(os.path.abspath(real)),
        text=text,
    )


def _label(path: Path) -> str:
    return os.path.normpath(path).replace(os.sep, "/")


def _read(real: Path, shown: Path) -> str:
    try:
        return real.read_text(encoding="utf-8")
    except FileNotFoundError:
        hint = ""
        if real.parent.is_dir():
            names = [p.name for p in real.parent.iterdir() if p.suffix in (".yaml", ".yml")]
            hint = did_you_mean(real.name, names)
        raise IncludeProblem(f"file not found: {_label(shown)}{hint}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise IncludeProblem(f"cannot read {_label(shown)}: {exc}") from exc


def _package(ref: str) -> ResolvedInclude:
    import importlib.resources

    package, _, inner = ref[len("package:") :].partition("/")
    if not package or not inner:
        raise IncludeProblem(
            f"malformed reference {ref!r}: expected package:PACKAGE/path/inside.yaml"
        )
    try:
        root = importlib.resources.files(package)
    except ModuleNotFoundError:
        raise IncludeProblem(
            f"package {package!r} is not installed (needed by {ref!r}); pip install it"
        ) from None
    except TypeError:
        raise IncludeProblem(
            f"{package!r} is a module, not a package (needed by {ref!r})"
        ) from None
    resource = root.joinpath(inner)
    if not resource.is_file():
        raise IncludeProblem(
            f"package {package!r} has no file {inner!r} (needed by {ref!r}): it is missing from "
            f"the installed package; {_ship_hint(package, inner)}"
        )
    try:
        text = resource.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise IncludeProblem(f"cannot read {ref!r}: {exc}") from exc
    real = Path(os.path.abspath(resource)) if isinstance(resource, Path) else None
    return ResolvedInclude(
        label=ref,
        key=os.path.realpath(real) if real else ref,
        base_dir=real.parent if real else Path.cwd(),
        file=real,
        watch=real,
        text=text,
    )


def _toolset(ref: str) -> ResolvedInclude:
    from importlib.metadata import entry_points

    name = ref[len("toolset:") :]
    found = entry_points(group=TOOLSET_GROUP)
    matches = [ep for ep in found if ep.name == name]
    if not matches:
        names = sorted({ep.name for ep in found})
        hint = did_you_mean(name, names)
        available = f" (installed: {', '.join(names)})" if names else " (none is installed)"
        raise IncludeProblem(
            f"no tool set named {name!r} in entry point group {TOOLSET_GROUP}{hint}{available}"
        )
    entry = matches[0]
    try:
        obj: Any = entry.load()
        module = sys.modules.get(entry.module)
        folder = _folder_of(module)
        if isinstance(obj, types.ModuleType):
            folder = _folder_of(obj)
            if hasattr(obj, "MANIFEST"):
                obj = obj.MANIFEST
            elif callable(getattr(obj, "manifest", None)):
                obj = obj.manifest()
            else:
                raise IncludeProblem(
                    f"tool set {name!r} ({entry.value}) is a module without MANIFEST or manifest()"
                )
        elif callable(obj):
            obj = obj()
    except IncludeProblem:
        raise
    except Exception as exc:
        # Third-party code runs here: whatever it raises becomes an include problem, with the
        # original chained, so a broken tool set does not crash the loader with a bare error.
        raise IncludeProblem(
            f"tool set {name!r} ({entry.value}) failed to load: {type(exc).__name__}: {exc}"
        ) from exc
    if isinstance(obj, str | os.PathLike):
        path = Path(obj).expanduser()
        real = path if path.is_absolute() else folder / path
        if not real.exists():
            package = entry.module.split(".")[0]
            top = _folder_of(sys.modules.get(package))
            inner = os.path.relpath(real, top) if real.is_relative_to(top) else real.name
            raise IncludeProblem(
                f"tool set {name!r} ({entry.value}) names {_label(real)}, which is missing from "
                f"the installed package {package!r}; {_ship_hint(package, inner)}"
            )
        text = _read(real, real)
        return ResolvedInclude(
            label=ref,
            key=os.path.realpath(real),
            base_dir=Path(os.path.abspath(real.parent)),
            file=real,
            watch=Path(os.path.abspath(real)),
            text=text,
        )
    if isinstance(obj, Mapping):
        return ResolvedInclude(label=ref, key=ref, base_dir=folder, data=obj)
    raise IncludeProblem(
        f"tool set {name!r} ({entry.value}) gave {type(obj).__name__}: expected a manifest path, "
        "a mapping, or a callable returning one"
    )


def _ship_hint(package: str, inner: str) -> str:
    """How to ship a manifest as package data: the usual cause of a missing one is a build
    backend that packs only `.py` files."""
    return (
        "ship it as package data, e.g. in the package's pyproject.toml "
        f'`[tool.setuptools.package-data]` `{package} = ["{inner}"]`, then reinstall '
        "(hatchling and flit ship every file inside the package folder)"
    )


def _folder_of(module: types.ModuleType | None) -> Path:
    file = getattr(module, "__file__", None)
    return Path(os.path.abspath(file)).parent if file else Path.cwd()
