"""The per-user store of OAuth logins for MCP servers: one JSON file outside every project.

Tokens belong to a person, not to a manifest, so they live under the user's config folder
(`$XDG_CONFIG_HOME/toolnexus/tokens.json`, else `~/.config/toolnexus/tokens.json`; the file
`$TOOLNEXUS_TOKEN_STORE` instead when set). The folder is made 0700 and the file 0600; every
write goes to a temporary file in the same folder and is renamed over the old one, under an
advisory lock, so a crash or two processes logging in at once never leave half a file. That
file has no name while it is written (`O_TMPFILE`), so a crash leaves no copy of the tokens
behind; where the filesystem cannot do that, the next update or `logout` removes the copy. The
folder, the file and the lock file are never symbolic links: a link planted in their place would
send tokens, a chmod or a new file wherever it points, so the store refuses to follow one.

Records are keyed by the server's URL (without fragment), so two manifests that name the same
server share one login. A record holds what the OAuth flow needs to act again without a browser:
the tokens with their absolute expiry, the client registration, and the metadata discovered for
the server (its protected-resource and authorization-server documents), so that a refresh in a
fresh process goes to the real token endpoint. The keyring is not used: it would be one more
dependency with a daemon behind it that headless machines lack, and it would only hold what the
0600 file already protects from other users.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
import secrets
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from ..errors import ConfigError

__all__ = ["TokenStore", "server_key", "token_store_path"]

_FILE = "tokens.json"

_O_TMPFILE: int = getattr(os, "O_TMPFILE", 0) if os.path.isdir("/proc/self/fd") else 0
"""`O_TMPFILE` where an unnamed file can be made and linked in (Linux, with /proc); 0 elsewhere,
and a named temp file is used instead."""

_LEGACY_TEMP = re.compile(r"\.tokens-[a-z0-9_]{8}")
"""The temp files of versions that staged with `tempfile.mkstemp(prefix=".tokens-")`."""


def token_store_path() -> Path:
    """Where logins are kept: `$TOOLNEXUS_TOKEN_STORE`, else the user's config folder."""
    override = os.environ.get("TOOLNEXUS_TOKEN_STORE")
    if override:
        return Path(override).expanduser()
    config = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(config).expanduser() / "toolnexus" / _FILE


def server_key(url: str) -> str:
    """The key of a server's record: its URL without fragment, scheme and host lower-cased."""
    parts = urlsplit(url.strip())
    netloc = parts.netloc.rpartition("@")[2].lower()
    return urlunsplit((parts.scheme.lower(), netloc, parts.path or "/", parts.query, ""))


def _link_fd(fd: int, name: Path) -> None:
    """Give the open file `fd` the name `name`: linkat through /proc with AT_SYMLINK_FOLLOW
    (which needs no privilege, unlike AT_EMPTY_PATH). Python passes that flag only when a
    `src_dir_fd` is given; a plain `os.link` of the /proc path would link the symlink itself."""
    proc = os.open("/proc/self/fd", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.link(str(fd), name, src_dir_fd=proc, follow_symlinks=True)
    finally:
        os.close(proc)


class TokenStore:
    """Read and change the records of one token file. Each method reads the file afresh, so
    two processes (a `toolnexus login` and a running agent) see each other's changes."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path if path is not None else token_store_path()

    def get(self, url: str) -> dict[str, Any] | None:
        """The record of the server at `url`, or None when there is none."""
        record = self._read().get(server_key(url))
        return dict(record) if isinstance(record, dict) else None

    def servers(self) -> list[str]:
        """The URLs that have a record, sorted."""
        return sorted(self._read())

    def update(self, url: str, change: Callable[[dict[str, Any]], None]) -> None:
        """Apply `change` to the server's record (created empty when missing) and save."""
        with self._locked():
            data = self._read()
            record = data.get(server_key(url))
            record = dict(record) if isinstance(record, dict) else {}
            change(record)
            data[server_key(url)] = record
            self._write(data)

    def remove(self, url: str) -> bool:
        """Forget the server's login, and any copy of the store a crash left; True when there
        was a login."""
        with self._locked():
            self._sweep()
            data = self._read()
            if data.pop(server_key(url), None) is None:
                return False
            self._write(data)
            return True

    # -- the file ----------------------------------------------------------------------------

    def _read(self) -> dict[str, Any]:
        self._refuse_linked_folder()
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            return {}
        except OSError as exc:
            if exc.errno != errno.ELOOP:  # O_NOFOLLOW met a link
                raise
            raise self._linked(self.path) from exc
        with os.fdopen(fd, encoding="utf-8") as file:
            text = file.read()
        try:
            data = json.loads(text)
        except ValueError:
            # A damaged store holds nothing usable; the next login rewrites it.
            return {}
        return data if isinstance(data, dict) else {}

    def _write(self, data: dict[str, Any]) -> None:
        """Replace the file with `data`, under the lock. The new content is written to an
        unnamed file (`O_TMPFILE`) that gets a name only for the instant before its rename, so
        a crash while it is written leaves no copy of the tokens; where the filesystem has no
        unnamed files, a named one, which the next update or logout removes (`_sweep`)."""
        self._sweep()
        text = json.dumps(data, indent=1, sort_keys=True).encode()
        folder = self.path.parent
        fd, temp = -1, None
        if _O_TMPFILE:
            try:
                fd = os.open(folder, _O_TMPFILE | os.O_WRONLY | os.O_CLOEXEC, 0o600)
            except OSError as exc:
                if exc.errno not in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL):
                    raise
        if fd < 0:
            temp = self._temp_name()
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        try:
            os.fchmod(fd, 0o600)
            view = memoryview(text)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
            if temp is None:
                temp = self._temp_name()
                _link_fd(fd, temp)
            os.replace(temp, self.path)
            temp = None
        finally:
            os.close(fd)
            if temp is not None:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(temp)

    def _temp_name(self) -> Path:
        return self.path.with_name(f".{self.path.name}.toolnexus-{secrets.token_hex(6)}.tmp")

    def _sweep(self) -> None:
        """Remove the temp files a crashed update left: called under the store's lock, when no
        writer of this store can be at work. Only names made for this store go, and only our
        own regular files; in our own folder (`toolnexus`, mode 0700) also the
        `.tokens-XXXXXXXX` files of versions that staged with `mkstemp`."""
        folder = self.path.parent
        ours = re.compile(re.escape(f".{self.path.name}.toolnexus-") + r"[0-9a-f]{12}\.tmp")
        own_folder = folder.name == "toolnexus" and self.path.name == _FILE
        try:
            names = os.listdir(folder)
        except OSError:
            return
        for name in names:
            if not (ours.fullmatch(name) or (own_folder and _LEGACY_TEMP.fullmatch(name))):
                continue
            try:
                st = os.lstat(folder / name)
                if stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid():
                    os.unlink(folder / name)
            except OSError:
                continue

    def _refuse_linked_folder(self) -> None:
        folder = self.path.parent
        if folder.is_symlink():
            raise self._linked(folder)

    def _linked(self, path: Path) -> ConfigError:
        return ConfigError(
            f"{path} is a symbolic link, and the token store does not follow links (one planted "
            "there would send your tokens, or a new file, wherever it points): remove it, or "
            "set TOOLNEXUS_TOKEN_STORE to a file in a folder of your own",
            field="token store",
        )

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        folder = self.path.parent
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._refuse_linked_folder()
        if folder.name == "toolnexus":
            os.chmod(folder, 0o700)  # our own folder: nobody else may list it
        path = folder / f".{self.path.name}.lock"
        try:
            lock = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            if exc.errno != errno.ELOOP:
                raise
            raise self._linked(path) from exc
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield
        finally:
            os.close(lock)
