"""Hot reload through the ways deployments change files, not only the ways editors do.

A deployment renames a new folder over the old one, deletes a folder and writes it again, or
(Kubernetes ConfigMap volumes) swaps a `..data` symbolic link to a new timestamped folder. Each
must reload, the watch must follow the new folder afterwards, and a watch whose files are gone
must say so and recover when they return, while the last good tools keep running.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from toolnexus import Toolkit, create_toolkit


def manifest(*names: str) -> str:
    tools = "".join(f"  - {{name: {n}, command: [echo, {n}]}}\n" for n in names)
    return f"version: 1\ntools:\n{tools}"


def write_config(folder: Path, *names: str) -> Path:
    """`folder/tools.yaml` declaring `names` (the folder made as needed)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "tools.yaml"
    path.write_text(manifest(*names), encoding="utf-8")
    return path


def eventually(check: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    """Wait (bounded) until `check()` holds: reloads run on the toolkit's own thread."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def has_tools(toolkit: Toolkit, *names: str) -> Callable[[], bool]:
    return lambda: toolkit.names() == sorted(names)


@pytest.fixture
def watched(tmp_path: Path) -> Iterator[Callable[[Path], Toolkit]]:
    made: list[Toolkit] = []

    def make(path: Path) -> Toolkit:
        toolkit = create_toolkit(str(path), watch=True)
        made.append(toolkit)
        return toolkit

    yield make
    for toolkit in made:
        toolkit.close()


def test_a_folder_renamed_over_reloads_and_is_watched_afterwards(
    tmp_path: Path, watched: Callable[[Path], Toolkit]
) -> None:
    cfg = tmp_path / "cfg"
    toolkit = watched(write_config(cfg, "a"))
    assert toolkit.names() == ["a"]

    staged = write_config(tmp_path / "cfg.new", "b").parent
    os.rename(cfg, tmp_path / "cfg.old")
    os.rename(staged, cfg)
    eventually(has_tools(toolkit, "b"), "the folder renamed over to be loaded")

    # The watch moved to the new folder: an edit there is seen, one in the old folder is not.
    (tmp_path / "cfg.old" / "tools.yaml").write_text(manifest("old"), encoding="utf-8")
    (cfg / "tools.yaml").write_text(manifest("b", "c"), encoding="utf-8")
    eventually(has_tools(toolkit, "b", "c"), "an edit in the new folder to be loaded")
    assert toolkit.watch_status() == {"state": "watching", "missing": [], "files": 1}


def test_a_folder_deleted_and_recreated_reports_the_loss_then_recovers(
    tmp_path: Path, watched: Callable[[Path], Toolkit]
) -> None:
    cfg = tmp_path / "cfg"
    toolkit = watched(write_config(cfg, "a"))

    shutil.rmtree(cfg)
    eventually(lambda: (toolkit.watch_status() or {}).get("state") == "lost", "the loss")
    status = toolkit.watch_status()
    assert status is not None and status["missing"] == [str(cfg / "tools.yaml")]
    # The reload the deletion triggered fails, and the last good tools keep running.
    eventually(lambda: toolkit.last_reload is not None, "the reload of the deletion")
    assert toolkit.last_reload is not None and not toolkit.last_reload.ok
    assert toolkit.names() == ["a"]

    write_config(cfg, "b")
    eventually(has_tools(toolkit, "b"), "the recreated manifest to be loaded")
    eventually(lambda: (toolkit.watch_status() or {}).get("state") == "watching", "recovery")
    (cfg / "tools.yaml").write_text(manifest("b", "c"), encoding="utf-8")
    eventually(has_tools(toolkit, "b", "c"), "a later edit to be loaded")


def test_a_whole_tree_deleted_and_recreated_recovers(
    tmp_path: Path, watched: Callable[[Path], Toolkit]
) -> None:
    # Two levels gone: the watch falls back to the nearest folder that still exists.
    cfg = tmp_path / "deploy" / "cfg"
    toolkit = watched(write_config(cfg, "a"))

    shutil.rmtree(tmp_path / "deploy")
    eventually(lambda: (toolkit.watch_status() or {}).get("state") == "lost", "the loss")
    write_config(cfg, "b")
    eventually(has_tools(toolkit, "b"), "the recreated tree to be loaded")


def configmap(root: Path, stamp: str, text: str) -> None:
    """Write a ConfigMap volume's next version as the kubelet does: a new timestamped folder,
    a `..data_tmp` link to it renamed over `..data`; `tools.yaml` is a link through `..data`."""
    version = root / f"..{stamp}"
    version.mkdir()
    (version / "tools.yaml").write_text(text, encoding="utf-8")
    (root / "..data_tmp").symlink_to(version.name)
    os.replace(root / "..data_tmp", root / "..data")
    if not (root / "tools.yaml").is_symlink():
        (root / "tools.yaml").symlink_to("..data/tools.yaml")


@pytest.mark.parametrize("delete_old", [True, False], ids=["old-deleted", "old-kept"])
def test_a_configmap_data_link_swap_reloads(
    tmp_path: Path, watched: Callable[[Path], Toolkit], delete_old: bool
) -> None:
    # With the old folder kept, nothing in the folder the manifest resolved to changes: only
    # the `..data` link does, so this proves the link itself is watched.
    root = tmp_path / "config"
    root.mkdir()
    configmap(root, "2026_12_04_1", manifest("a"))
    toolkit = watched(root / "tools.yaml")
    assert toolkit.names() == ["a"]

    configmap(root, "2026_12_04_2", manifest("b"))
    if delete_old:
        shutil.rmtree(root / "..2026_12_04_1")
    eventually(has_tools(toolkit, "b"), "the swapped ConfigMap to be loaded")

    configmap(root, "2026_12_04_3", manifest("b", "c"))
    eventually(has_tools(toolkit, "b", "c"), "the next swap to be loaded")
    assert toolkit.watch_status() == {"state": "watching", "missing": [], "files": 2}


def test_an_unrelated_file_beside_the_folder_does_not_reload(
    tmp_path: Path, watched: Callable[[Path], Toolkit]
) -> None:
    # The folder's parent is watched too (for renames of the folder): its other entries are
    # not the manifest's business.
    cfg = tmp_path / "cfg"
    toolkit = watched(write_config(cfg, "a"))
    generation = toolkit.generation
    (tmp_path / "notes.txt").write_text("unrelated", encoding="utf-8")
    (tmp_path / "other").mkdir()
    (cfg / "tools.yaml").write_text(manifest("a", "b"), encoding="utf-8")
    eventually(has_tools(toolkit, "a", "b"), "the edit")
    assert toolkit.generation == generation + 1  # one reload: the edit, not the neighbours


@pytest.mark.anyio
async def test_healthz_says_how_many_watched_files_are_gone(tmp_path: Path) -> None:
    # `/healthz` needs no token, so it tells the state and a count, never the paths.
    import anyio
    import httpx

    from toolnexus import acreate_toolkit
    from toolnexus.serve import http_app

    cfg = tmp_path / "cfg"
    write_config(cfg, "a")
    async with await acreate_toolkit(str(cfg / "tools.yaml"), watch=True) as toolkit:
        app = http_app(toolkit)
        transport = httpx.ASGITransport(app)
        client = httpx.AsyncClient(transport=transport, base_url="http://t")
        with anyio.fail_after(20):
            async with app.router.lifespan_context(app), client as http:
                health = (await http.get("/healthz")).json()
                assert health["watch"] == {"state": "watching", "missing": 0}
                shutil.rmtree(cfg)
                while (await http.get("/healthz")).json()["watch"]["state"] != "lost":
                    await anyio.sleep(0.02)
                health = (await http.get("/healthz")).json()
                assert health == {
                    "status": "ok",  # the last good tools still serve
                    "generation": 1,
                    "watch": {"state": "lost", "missing": 1},
                }
                assert str(cfg) not in json.dumps(health)
