"""Which paths hold git metadata that makes git run a program or read another repository.

One place for that knowledge, so the file tools (and, at the lead's merge, the sandbox's
protected paths) share it. The set is complete for what a *local* git command (status, diff,
log, show, commit...) honours from files inside a work tree; each entry says why:

- `config`, `config.worktree` of any git directory: every program setting (`core.fsmonitor`,
  `core.pager`, `core.hooksPath`, `diff.external`, filter and diff drivers, aliases,
  `include.path` to read another file);
- `hooks/` of any git directory: programs git runs on commit, merge, checkout...;
- `commondir`: the git directory takes its config, hooks and objects from another one;
- `objects/info/alternates`, `objects/info/http-alternates`: objects read from another repository;
- an entry named `.git` itself: a gitfile (`gitdir: /elsewhere`) moves the repository anywhere,
  and replacing a `.git` folder by one is the same;
- a folder that looks like a git directory (`HEAD`, `objects/`, `refs/`) is one: git treats it
  as a bare repository when run inside it (what `safe.bareRepository` exists for), so its
  `config`, `hooks/`, `commondir` and alternates are protected too, and so is completing that
  look around them;
- the user's own git configuration (`~/.gitconfig`, `$XDG_CONFIG_HOME/git/config`, the file
  `$GIT_CONFIG_GLOBAL` names), for a workspace that holds the home folder.

"Any git directory": `.git` and everything under it, so submodules' (`.git/modules/<name>/`)
and linked worktrees' (`.git/worktrees/<id>/`) git directories are covered, in the workspace's
repository and in every nested one, existing or about to be created.

Left out on purpose: `.gitattributes` and `.git/info/attributes` only *select* drivers whose
commands live in config; `.gitmodules` cannot set a command (git ignores `update = !cmd`
there) and only `git submodule` reads its URLs; `info/exclude`, refs, the index and objects
change what git shows, never what it runs. A hooks folder or included file that a protected
config itself names (`core.hooksPath = .husky`) is project content the user chose.

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

GITDIR_PROGRAM_ENTRIES = frozenset({"config", "config.worktree", "commondir", "hooks"})
"""First components, below a git directory, that name programs or another git directory."""
ALTERNATES = (("objects", "info", "alternates"), ("objects", "info", "http-alternates"))
"""Paths, below a git directory, that make it read objects from another repository."""
_GITDIR_LOOK = ("HEAD", "objects", "refs")
"""What makes git take a folder for a git directory (`is_git_directory` in git's setup.c)."""

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


def git_refusal(path: Path) -> str | None:
    """Why creating, replacing or deleting `path` (absolute) is refused, or None.

    Pure on the path's text except for the bare-repository rule and the user's configuration,
    which look at the folders above `path` (a few `stat` calls, only for paths whose names
    could matter).
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
        if folded[start] in _LOOK_FOLDED or _entry(parts[start:], folded[start:]) is not None:
            bare = _bare_repository_refusal(Path(*parts[:start]), parts[start:], folded[start:])
            if bare is not None:
                return bare
    if _is_user_config(path):
        return "it is the user's own git configuration"
    return None


_LOOK_FOLDED = frozenset(fold(n) for n in _GITDIR_LOOK)


def _bare_repository_refusal(
    folder: Path, below: tuple[str, ...], folded: tuple[str, ...]
) -> str | None:
    """Refuse a write that leaves `folder` both looking like a git directory and holding a
    protected entry (or that is the write adding one of the two)."""
    entry = _entry(below, folded)
    if not folder.is_dir():
        return None
    looks = all(folded[0] == fold(name) or (folder / name).exists() for name in _GITDIR_LOOK)
    if not looks:
        return None
    dangerous = (
        entry is not None
        or any((folder / name).exists() for name in GITDIR_PROGRAM_ENTRIES)
        or any((folder / Path(*a)).exists() for a in ALTERNATES)
    )
    if not dangerous:
        return None
    return (
        f"{folder} looks like a git directory (HEAD, objects/, refs/), which git uses as a "
        f"bare repository, and this write changes its {below[0]!r}"
    )


def protected_under(root: Path) -> list[Path]:
    """The protected paths under `root` as they stand now, for a sandbox that must make them
    read-only by mounting (it cannot apply a predicate): every `.git` entry (a gitfile is
    protected whole), and for each git directory found (`.git`, its `modules/` and `worktrees/`
    git directories, bare lookalikes) its `config`, `config.worktree`, `commondir`, `hooks` and
    alternates paths, *whether or not they exist yet* (a sandbox that cannot protect a missing
    path protects its parent). Symlinks are not followed; objects are not walked.
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
        if {"HEAD", "objects", "refs"} <= names and not is_dotgit(here.name):
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
