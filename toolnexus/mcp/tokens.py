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

A toolkit whose state is shared (`state="redis://..."`, `serve --state`, the manifest's
`serve: {state: ...}`, `TOOLNEXUS_STATE_URL`) keeps its logins in that store instead
(`SharedTokenStore`), so every replica uses one login and sees the others' refreshes: a file per
replica would have each spend the refresh token the others replaced. `login_store_for` chooses;
`LoginStore` is what both offer the OAuth flow (`mcp.auth`).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import json
import os
import re
import secrets
import stat
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit, urlunsplit

from ..errors import ConfigError, StateUnavailable

if TYPE_CHECKING:
    from ..state import StateBackend

__all__ = [
    "LoginStore",
    "SharedTokenStore",
    "TokenStore",
    "login_store_for",
    "server_key",
    "token_store_path",
]

Unlock = Callable[[], Awaitable[None]]
"""Ends a hold taken with `LoginStore.hold_refresh` (safe to call twice)."""

REFRESH_HOLD_S = 30.0
"""How long one replica may hold a server's refresh in a shared store before another may take
it (a replica that died while refreshing must not stop the others for longer)."""


class LoginStore(Protocol):
    """Where the OAuth flow of `auth: oauth` keeps the records of `TokenStore`: the user's file,
    or the toolkit's shared state store. Each method reads the store afresh."""

    @property
    def where(self) -> str:
        """The store, in words, for messages ("tokens saved in ...")."""
        ...

    async def aget(self, url: str) -> dict[str, Any] | None:
        """The record of the server at `url`, or None."""
        ...

    async def aupdate(self, url: str, change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
        """Apply `change` to the record (created empty when missing) as one atomic step, and
        return the record written. `change` may run more than once (a shared store retries it
        on what another writer wrote meanwhile), so it must only change the record."""
        ...

    async def aremove(self, url: str) -> bool:
        """Forget the server's login; True when there was one."""
        ...

    async def hold_refresh(self, url: str) -> Unlock:
        """Wait until no other holder refreshes the server's tokens, and hold that until the
        returned function is awaited: the holder reads the record again and refreshes only if
        nobody else did, so refresh tokens that rotate are spent once."""
        ...


def login_store_for(state: StateBackend | None) -> LoginStore:
    """The logins of a toolkit whose state store is `state`: the user's token file for the
    in-process store (or none), else that shared store."""
    if state is None or state.url == "memory://":
        return TokenStore()
    return SharedTokenStore(state)


async def _no_hold() -> None:
    return None


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

    def update(self, url: str, change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
        """Apply `change` to the server's record (created empty when missing), save, and return
        the record saved."""
        with self._locked():
            data = self._read()
            record = data.get(server_key(url))
            record = dict(record) if isinstance(record, dict) else {}
            change(record)
            data[server_key(url)] = record
            self._write(data)
            return dict(record)

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

    # -- as a LoginStore (a local file: read and written in place, it takes microseconds) ----

    @property
    def where(self) -> str:
        return str(self.path)

    async def aget(self, url: str) -> dict[str, Any] | None:
        return self.get(url)

    async def aupdate(self, url: str, change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
        return self.update(url, change)

    async def aremove(self, url: str) -> bool:
        return self.remove(url)

    async def hold_refresh(self, url: str) -> Unlock:
        """Nothing is held: processes sharing the file read it again before a refresh and
        after a refused one (`mcp.auth`), which covers one person's processes on one machine;
        replicas share a state store, which holds."""
        return _no_hold

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


class SharedTokenStore:
    """Logins in a shared state store (Redis): one record per server URL, under the key
    `oauth:<server key>`, written by compare-and-set (`StateBackend.update`), with a hold of
    `REFRESH_HOLD_S` seconds around each refresh so two replicas never spend one refresh token.

    The records hold bearer tokens as the file does: the store must be as private as the file
    (a password, TLS, a network only the replicas reach). A store that does not answer is an
    error naming it (`StateUnavailable`), never a fall back to the file: a replica that refreshed
    into its own file would spend the refresh token every other replica holds.
    """

    def __init__(self, state: StateBackend) -> None:
        self.state = state

    @property
    def where(self) -> str:
        return f"the shared state store {self.state.url}"

    def _key(self, url: str) -> str:
        return "oauth:" + server_key(url)

    def _unavailable(self, url: str, exc: StateUnavailable) -> StateUnavailable:
        return StateUnavailable(f"the OAuth token store for {server_key(url)} failed: {exc}")

    async def aget(self, url: str) -> dict[str, Any] | None:
        try:
            raw = await self.state.get(self._key(url))
        except StateUnavailable as exc:
            raise self._unavailable(url, exc) from exc
        return None if raw is None else _decoded(raw)

    async def aupdate(self, url: str, change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
        written: dict[str, Any] = {}

        def apply(raw: bytes | None) -> bytes:
            record = {} if raw is None else _decoded(raw)
            change(record)
            written.clear()
            written.update(record)
            return json.dumps(record, sort_keys=True).encode()

        try:
            await self.state.update(self._key(url), apply)
        except StateUnavailable as exc:
            raise self._unavailable(url, exc) from exc
        return dict(written)

    async def aremove(self, url: str) -> bool:
        had: list[bool] = []

        def apply(raw: bytes | None) -> None:
            had[:] = [raw is not None]

        try:
            await self.state.update(self._key(url), apply)
        except StateUnavailable as exc:
            raise self._unavailable(url, exc) from exc
        return bool(had and had[0])

    async def hold_refresh(self, url: str) -> Unlock:
        key = "oauth-refresh:" + server_key(url)
        mine = secrets.token_hex(16).encode()
        deadline = time.monotonic() + REFRESH_HOLD_S + 5.0
        delay = 0.005
        try:
            # Taken when free (the key is absent or expired), else left as it is: the holder
            # finishes within REFRESH_HOLD_S or its hold expires.
            while await self.state.update(key, lambda v: v or mine, ttl=REFRESH_HOLD_S) != mine:
                if time.monotonic() > deadline:
                    raise StateUnavailable(
                        f"another replica has held the refresh of {server_key(url)} for over "
                        f"{REFRESH_HOLD_S:g} s (its hold does not expire: check the store's clock)"
                    )
                await asyncio.sleep(delay)  # polling: a refresh takes one token request
                delay = min(delay * 2, 0.1)
        except StateUnavailable as exc:
            raise self._unavailable(url, exc) from exc
        released = False

        async def unlock() -> None:
            nonlocal released
            if released:
                return
            released = True
            with contextlib.suppress(StateUnavailable):  # its expiry frees it anyway
                await self.state.update(key, lambda v: None if v == mine else v)

        return unlock


def _decoded(raw: bytes) -> dict[str, Any]:
    try:
        data = json.loads(raw)
    except ValueError:
        return {}  # a damaged record holds nothing usable; the next login rewrites it
    return data if isinstance(data, dict) else {}
