"""Registry: atomic registration, sorted listing, subsets and clones, thread safety."""

from __future__ import annotations

import threading

import pytest

from toolnexus import Registry, Result, Tool, ToolContext, ToolNotFound, UsageError


async def _noop(args: dict[str, object], ctx: ToolContext) -> Result:
    return Result()


def t(name: str, origin: str | None = None) -> Tool:
    return Tool(name=name, handler=_noop, origin=origin)


def test_listing_is_sorted_by_name() -> None:
    reg = Registry([t("zeta"), t("alpha"), t("Mid")])
    assert reg.names() == ["Mid", "alpha", "zeta"]
    assert [x.name for x in reg] == reg.names()


def test_batch_with_a_duplicate_registers_nothing_and_names_both_owners() -> None:
    reg = Registry([t("read", "tools.yaml:3")])
    with pytest.raises(UsageError) as err:
        reg.register(t("write"), t("read", "team.yaml:9"))
    assert "tools.yaml:3" in str(err.value)
    assert "team.yaml:9" in str(err.value)
    assert reg.names() == ["read"]


def test_batch_with_an_invalid_name_registers_nothing() -> None:
    reg = Registry()
    with pytest.raises(UsageError):
        reg.register(t("good"), t("bad name!"))
    assert len(reg) == 0


def test_replace_and_remove() -> None:
    reg = Registry([t("a", "one")])
    reg.register(t("a", "two"), replace=True)
    got = reg.get("a")
    assert got is not None
    assert got.origin == "two"
    assert reg.remove("a").origin == "two"
    with pytest.raises(ToolNotFound):
        reg.remove("a")


def test_subset_and_clone_are_independent() -> None:
    reg = Registry([t("a"), t("b"), t("c")])
    sub = reg.subset(["c", "a"])
    assert sub.names() == ["a", "c"]
    clone = reg.clone()
    clone.remove("b")
    assert "b" in reg
    assert "b" not in clone
    with pytest.raises(ToolNotFound, match="did you mean 'a'"):
        reg.subset(["aa"])


def test_concurrent_registration_from_threads_loses_nothing() -> None:
    reg = Registry()

    def worker(k: int) -> None:
        for i in range(200):
            reg.register(t(f"t{k}_{i}"))
            reg.tools()

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert len(reg) == 800
    assert reg.names() == sorted(reg.names())
