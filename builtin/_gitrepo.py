"""Where git finds a repository from a folder, and every config file it reads there: asked of
git itself, not worked out from a list of layouts.

Git recognises repositories in several shapes (a `.git` folder, a gitfile, `commondir`, a bare
repository in the folder or any parent, a linked worktree's git directory) and reads config from
several files (`config`, `config.worktree` under `extensions.worktreeConfig`, `include.path`
and `includeIf` targets). Rather than keep a second copy of those rules, the shell's known-safe
check runs one `git config --list --show-origin --show-scope` in the folder, with the setup
trace on (`GIT_TRACE_SETUP`): the same process tells where the git directory, the common
directory and the work tree are, and lists every config entry with the file it came from.

Git is asked under a neutral environment that finds *at least* what any real run could: no
`GIT_*` variable of the caller, no system or global config (the user's own, not the model's),
`safe.directory=*` (ownership never hides a repository), `safe.bareRepository=all` (bare
repositories are found even where the user's config would refuse them), and discovery across
filesystems. The caller's environment is judged apart (`environment_redirects`).

Doubt never allows: a git that cannot start, times out, or answers in a form not understood
raises `GitUnclear`, and the caller refuses.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Collection
from dataclasses import dataclass
from functools import cache
from pathlib import Path

__all__ = ["GitUnclear", "Repository", "environment_redirects", "repository_at"]

_NEUTRAL = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_DISCOVERY_ACROSS_FILESYSTEM": "1",
    "GIT_OPTIONAL_LOCKS": "0",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_TRACE_SETUP": "2",
    "GIT_TRACE_BARE": "1",
    "LC_ALL": "C",
}
_WIDEST = ("-c", "safe.directory=*", "-c", "safe.bareRepository=all")
_SMALL = 65_536
"""Largest file whose bytes are part of a fingerprint (config files, HEAD, gitfiles)."""


class GitUnclear(Exception):
    """Git could not say where the repository is: the caller must not allow."""


@dataclass(frozen=True, kw_only=True)
class Repository:
    """What git answered for one folder."""

    git_dir: Path
    common_dir: Path
    work_tree: Path | None
    """None for a bare repository (no work tree)."""
    configs: tuple[tuple[str, str], ...]
    """(file, key) of every config entry git read from a file (absolute, symlinks resolved),
    in its order; keys lower-cased as git prints them. Command-line entries are left out."""


@dataclass(frozen=True)
class _Cached:
    before: tuple[object, ...]
    after: tuple[object, ...]
    answer: Repository | None


_answers: dict[Path, _Cached] = {}


def repository_at(folder: Path) -> Repository | None:
    """The repository git uses from `folder` (None: git finds none and refuses to run).

    The answer is kept while nothing git looked at changed: every folder from `folder` up
    (its `.git`, `HEAD`, `commondir`, `objects`, `refs`), and the repository's own files and
    every config file git read, by their bytes. So git runs once per change, not per call.

    Raises:
        GitUnclear: git did not answer in a form understood.
    """
    folder = Path(os.path.realpath(folder))
    before = _discovery_inputs(folder)
    cached = _answers.get(folder)
    if cached is not None and cached.before == before and cached.after == _after(cached.answer):
        return cached.answer
    answer = _ask(folder)
    if len(_answers) >= 64:  # workspaces come and go (tests, temp folders): keep it small
        _answers.clear()
    _answers[folder] = _Cached(before, _after(answer), answer)
    return answer


def _stamp(path: Path) -> object:
    """What can change git's reading of `path`: its kind, and a small file's bytes."""
    try:
        st = path.lstat()
    except OSError:
        return None
    if path.is_symlink():
        return ("link", os.readlink(path))
    if not path.is_file():
        return ("dir" if path.is_dir() else "other", st.st_ino)
    if st.st_size > _SMALL:
        return ("file", st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    try:
        return ("file", path.read_bytes())
    except OSError:
        return ("unreadable", st.st_mtime_ns)


def _discovery_inputs(folder: Path) -> tuple[object, ...]:
    names = (".git", "HEAD", "commondir", "objects", "refs")
    return tuple(_stamp(d / n) for d in (folder, *folder.parents) for n in names)


def _after(answer: Repository | None) -> tuple[object, ...]:
    if answer is None:
        return ()
    homes = dict.fromkeys((answer.git_dir, answer.common_dir))
    names = ("HEAD", "commondir", "config", "config.worktree", "objects", "refs", "gitdir")
    files = [h / n for h in homes for n in names]
    files += [h / "objects" / "info" / "alternates" for h in homes]
    files += [Path(f) for f in dict.fromkeys(f for f, _ in answer.configs)]
    return tuple(_stamp(f) for f in files)


def _run(folder: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    env = {"PATH": os.environ.get("PATH", os.defpath), **_NEUTRAL}
    try:
        return subprocess.run(
            ["git", *_WIDEST, *args],
            cwd=folder,
            env=env,
            capture_output=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise GitUnclear(f"git could not be run: {exc}") from exc


def _ask(folder: Path) -> Repository | None:
    done = _run(folder, "config", "--list", "--show-origin", "--show-scope", "--null")
    if done.returncode != 0:
        raise GitUnclear(done.stderr.decode("utf-8", "replace").strip() or "git failed")
    setup = _setup(done.stderr)
    if not setup:
        # No trace: git found no repository. Confirm it in the words git uses for that.
        check = _run(folder, "rev-parse", "--git-dir")
        if check.returncode == 128 and b"not a git repository" in check.stderr:
            return None
        raise GitUnclear("git neither traced a repository nor said there is none")
    try:
        cwd = Path(setup["cwd"])
        git_dir = _absolute(cwd, setup["git_dir"])
        common_dir = _absolute(cwd, setup["git_common_dir"])
        tree = setup["worktree"]
    except KeyError as exc:
        raise GitUnclear(f"git's setup trace lacks {exc}") from None
    return Repository(
        git_dir=git_dir,
        common_dir=common_dir,
        work_tree=None if tree == "(null)" else _absolute(cwd, tree),
        configs=_configs(done.stdout, cwd),
    )


def _setup(stderr: bytes) -> dict[str, str]:
    found: dict[str, str] = {}
    for line in stderr.decode("utf-8", "surrogateescape").splitlines():
        if line.startswith("setup: ") and ": " in line[7:]:
            name, value = line[7:].split(": ", 1)
            found[name] = value
    return found


def _absolute(cwd: Path, given: str) -> Path:
    return Path(os.path.realpath(cwd / given))


def _configs(listing: bytes, cwd: Path) -> tuple[tuple[str, str], ...]:
    fields = listing.split(b"\0")
    if fields[-1] != b"" or (len(fields) - 1) % 3:
        raise GitUnclear("git's config listing is not in the form asked for")
    out: list[tuple[str, str]] = []
    for i in range(0, len(fields) - 1, 3):
        scope, origin, entry = (f.decode("utf-8", "surrogateescape") for f in fields[i : i + 3])
        if scope == "command":
            continue  # what this module itself gave (`-c safe.directory=*`)
        if not origin.startswith("file:"):
            raise GitUnclear(f"a config entry of git comes from {origin!r}, not a file")
        file = str(_absolute(cwd, origin[len("file:") :]))
        out.append((file, entry.split("\n", 1)[0].lower()))
    return tuple(out)


def environment_redirects(overridden: Collection[str] = ()) -> str | None:
    """The first variable of the toolkit's environment that tells git where a repository, its
    objects or its config is (git's own list, `git rev-parse --local-env-vars`), or None.
    `overridden`: variables the caller sets itself for every command (not counted)."""
    names = sorted(n for n in os.environ if n.startswith("GIT_") and n not in overridden)
    if not names:
        return None
    try:
        local = _local_env_vars()
    except GitUnclear:
        return names[0]
    return next((n for n in names if n in local), None)


@cache
def _local_env_vars() -> frozenset[str]:
    done = _run(Path("/"), "rev-parse", "--local-env-vars")
    if done.returncode != 0 or not done.stdout.strip():
        raise GitUnclear("git did not list the variables it reads for a repository")
    return frozenset(done.stdout.decode().split())
