"""Which paths hold git metadata that makes git run a program or read another repository.

One place for that knowledge, so the file tools (and, at the lead's merge, the sandbox's
protected paths) share it. The rule follows git's own definition of a repository rather than a
list of layouts. Git takes a folder `D` for a git directory when `D/HEAD` exists (and is valid)
and the common directory `C` (`D` itself, or the folder `D/commondir` names) holds `objects/`
and `refs/` (`is_git_directory` in git's setup.c). It finds one from a working folder through an
entry named `.git` (a folder, or a gitfile `gitdir: <D>`), or by taking the folder itself or
any parent for `D` (a bare repository, whatever `safe.bareRepository` the user may not have
set). Every layout git accepts (a `.git` folder, a gitfile, a bare repository at the workspace's
top or below it, a linked worktree's `worktrees/<id>/`, a submodule's `modules/<name>/`, a
`HEAD` plus `commondir` pointing at a folder with config, objects and refs) is one of these.
So a write is refused when it:

- touches an entry named `.git` (a gitfile moves the repository anywhere), or anything below
  one that names programs or another repository (below);
- creates a file named `commondir`: it makes a folder take config, objects and refs from
  another one, and only git writes one;
- leaves some folder `D` on its path both a git directory by git's definition above (counting
  what the same call creates: a patch's other files) and holding, in `D` or in `C`, an entry
  that names programs or another repository, or is the write adding either of the two;
- is the user's own git configuration, for a workspace that holds the home folder.

Entries that name programs or another repository, below a git directory (each says why):

- `config`, `config.worktree`: every program setting (`core.fsmonitor`, `core.pager`,
  `core.hooksPath`, `diff.external`, filter and diff drivers, aliases, `include.path` to read
  another file);
- `hooks/`: programs git runs on commit, merge, checkout...;
- `commondir`, `gitdir`: the git directory takes its config, hooks and objects from another one,
  and a linked worktree's git directory names its work tree;
- `objects/info/alternates`, `objects/info/http-alternates`: objects read from another
  repository.

What the guard cannot see (a write that makes git take a folder it never names, through a
`commondir` the user put there pointing at a folder the tools may write) the shell's known-safe
check still catches: it asks git itself where the repository is and judges every config file git
reads there (`builtin/shell.py`).

Left out on purpose: `.gitattributes` and `info/attributes` only *select* drivers whose
commands live in config; `.gitmodules` cannot set a command (git ignores `update = !cmd`
there) and only `git submodule` reads its URLs; `info/exclude`, refs, the index and objects of
an existing `.git` change what git shows, never what it runs. A hooks folder or included file
that a protected config itself names (`core.hooksPath = .husky`) is project content the user
chose.

Names are compared as git compares them on the systems where it is most lenient (case and
Unicode width folded, HFS+ ignorable code points, NTFS trailing dots and spaces, `git~1`
short names, `::$INDEX_ALLOCATION` streams): a spelling that is `.git` anywhere counts here.
"""

from __future__ import annotations

import os
import re
import unicodedata
from pathlib import Path

__all__ = ["git_refusal", "gitdir_entry", "protected_under"]

GITDIR_PROGRAM_ENTRIES = frozenset({"config", "config.worktree", "commondir", "gitdir", "hooks"})
"""First components, below a git directory, that name programs or another git directory."""
ALTERNATES = (("objects", "info", "alternates"), ("objects", "info", "http-alternates"))
"""Paths, below a git directory, that make it read objects from another repository."""
_HEAD = "head"
_COMMON = ("objects", "refs")
"""What git needs in a common directory (`is_git_directory` in git's setup.c)."""

_HFS_IGNORED = dict.fromkeys(
    [0x200C, 0x200D, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x206A, 0x2070), 0xFEFF]
)
_SHORT_NAME = re.compile(r"git~\d+")


def fold(name: str) -> str:
    """`name` as the most lenient filesystem git runs on would see it."""
    name = unicodedata.normalize("NFKC", name).translate(_HFS_IGNORED).casefold()
    return name.split(":", 1)[0].rstrip(". ")


def is_dotgit(name: str) -> bool:
    folded = fold(name)
    return folded == ".git" or _SHORT_NAME.fullmatch(folded) is not None


def gitdir_entry(parts: tuple[str, ...]) -> str | None:
    """Why `parts`, a path below a git directory, is protected there (or None)."""
    return _entry(parts, tuple(fold(p) for p in parts))


def _entry(parts: tuple[str, ...], folded: tuple[str, ...]) -> str | None:
    if folded and folded[0] in GITDIR_PROGRAM_ENTRIES:
        return f"{parts[0]!r} of a git directory"
    for alternates in ALTERNATES:
        if folded[: len(alternates)] == alternates:
            return "the alternates of a git directory (objects read from another repository)"
    return None


_INPUTS = frozenset({_HEAD, *_COMMON, *GITDIR_PROGRAM_ENTRIES})
"""First components below a folder that can make it a git directory or arm one."""


def git_refusal(path: Path, creating: frozenset[Path] = frozenset()) -> str | None:
    """Why creating, replacing or deleting `path` (absolute) is refused, or None.

    `creating` holds the other paths (absolute) the same call creates, such as the rest of a
    patch: they count as present, so a patch cannot lay out a repository whose pieces each
    pass alone. Pure on the path's text except for git's definition of a git directory and
    the user's configuration, which look at the folders above `path` (a few `stat` calls, only
    for paths whose names could matter).
    """
    parts = path.parts
    folded = tuple(fold(p) for p in parts)
    for index, name in enumerate(folded):
        if not (name == ".git" or _SHORT_NAME.fullmatch(name)):
            continue
        if index == len(parts) - 1:
            return (
                f"{path.name!r} is a repository's git entry (as a file, a gitfile moves the "
                f"repository anywhere)"
            )
        for start in range(index + 1, len(parts)):
            # `.git/modules/<name>/` and `.git/worktrees/<id>/` are git directories too.
            why = _entry(parts[start:], folded[start:])
            if why is not None:
                return f"it is the {why} ({Path(*parts[: index + 1])})"
    for start in range(1, len(parts)):
        if folded[start] in _INPUTS or _entry(parts[start:], folded[start:]) is not None:
            why = _git_directory_refusal(Path(*parts[:start]), path, creating | {path})
            if why is not None:
                return why
    if folded[-1] == "commondir":
        return (
            "a file named 'commondir' makes git take a folder's config, objects and refs from "
            "another folder (only git writes one)"
        )
    if _is_user_config(path):
        return "it is the user's own git configuration"
    return None


def _present(path: Path, creating: frozenset[Path]) -> bool:
    """`path` exists, or the call creates it or something below it."""
    return path.exists() or any(c == path or path in c.parents for c in creating)


def _common_dir(folder: Path) -> Path | None:
    """The common directory git would use for `folder` (None: git could not tell either, so
    neither can we: such a folder is treated as a git directory)."""
    pointer = folder / "commondir"
    if not pointer.exists():
        return folder
    try:
        target = pointer.read_text("utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return Path(os.path.realpath(folder / target)) if target else None


def _git_directory_refusal(folder: Path, path: Path, creating: frozenset[Path]) -> str | None:
    """Refuse a write that leaves `folder` both a git directory by git's definition and holding
    (in itself or its common directory) an entry that names programs or another repository."""
    if not _present(folder / "HEAD", creating):
        return None
    common = _common_dir(folder)
    if common is not None and not all(_present(common / n, creating) for n in _COMMON):
        return None
    homes = [folder] if common in (None, folder) else [folder, common]
    armed = any(
        _present(home / name, creating)
        for home in homes
        for name in (*GITDIR_PROGRAM_ENTRIES, *(Path(*a) for a in ALTERNATES))
    )
    if not armed:
        return None
    below = path.relative_to(folder).parts[0] if folder in path.parents else path.name
    return (
        f"{folder} looks like a git directory to git itself (HEAD, and objects/ and refs/ in "
        f"{common or 'the folder its commondir names'}), which git uses as a repository, and "
        f"this write changes its {below!r}"
    )


def is_git_directory(folder: Path) -> bool:
    """Whether git takes `folder` for a git directory (`is_git_directory` in git's setup.c,
    without the checks of HEAD's content: any HEAD counts)."""
    if not (folder / "HEAD").exists():
        return False
    common = _common_dir(folder)
    return common is None or all((common / name).exists() for name in _COMMON)


def protected_under(root: Path) -> list[Path]:
    """The protected paths under `root` as they stand now, for a sandbox that must make them
    read-only by mounting (it cannot apply a predicate): every `.git` entry (a gitfile is
    protected whole), and for each git directory found (`.git`, its `modules/` and `worktrees/`
    git directories, any folder git takes for one) its `config`, `config.worktree`,
    `commondir`, `gitdir`, `hooks` and alternates paths, *whether or not they exist yet* (a
    sandbox that cannot protect a missing path protects its parent). Symlinks are not
    followed; objects are not walked.
    """
    found: list[Path] = []
    for folder, dirs, files in os.walk(root):
        here = Path(folder)
        names = set(dirs) | set(files)
        for name in sorted(names):
            if is_dotgit(name):
                found.append(here / name)
                if name in dirs:
                    found += _gitdir_paths(here / name)
        if "HEAD" in names and not is_dotgit(here.name) and is_git_directory(here):
            found += _gitdir_paths(here)
        dirs[:] = [d for d in dirs if not is_dotgit(d) and not (here / d).is_symlink()]
    return list(dict.fromkeys(found))


def _gitdir_paths(gitdir: Path) -> list[Path]:
    out = [gitdir / name for name in sorted(GITDIR_PROGRAM_ENTRIES)]
    out += [gitdir.joinpath(*a) for a in ALTERNATES]
    for nested in ("modules", "worktrees"):
        base = gitdir / nested
        if base.is_dir() and not base.is_symlink():
            for folder, dirs, files in os.walk(base):
                if "HEAD" in files:  # a submodule's or a linked worktree's git directory
                    out += _gitdir_paths(Path(folder))
                    dirs[:] = []
    return out


def _is_user_config(path: Path) -> bool:
    global_config = os.environ.get("GIT_CONFIG_GLOBAL")
    if fold(path.name) not in {".gitconfig", "config", fold(os.path.basename(global_config or ""))}:
        return False  # the common case, without building paths or calling the system
    home = Path.home()
    xdg = Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config")
    candidates = [home / ".gitconfig", xdg / "git" / "config"]
    if global_config:
        candidates.append(Path(global_config))
    real = Path(os.path.realpath(path))
    return any(real == Path(os.path.realpath(c)) for c in candidates)
