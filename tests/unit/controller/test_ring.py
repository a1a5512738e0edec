"""The shard ring and membership (pure): who owns a TaskQueue given the Leases seen and the time."""

from __future__ import annotations

import pytest

from taskqueue.controller.ring import LeaseSeen, Membership, owner, weight

KEYS = [f"uid-{i:05d}" for i in range(3000)]


def lease(name: str, renew: str | None = "t0", *, holder: str | None = None,
          duration: float = 15) -> LeaseSeen:
    return LeaseSeen(name, name if holder is None else holder, renew, duration)


def joined(me: str, leases: list[LeaseSeen], *, at: float = 0.0, settle: float = 6.0
           ) -> Membership:
    return Membership(me, lease_seconds=15, settle=settle).observe(leases, now=at, renewed=True)


# -- the ring ----------------------------------------------------------------------------------
def test_weight_is_stable_across_processes() -> None:
    # blake2b, not hash(): the same on every replica whatever PYTHONHASHSEED is
    assert weight("uid-1", "a") == weight("uid-1", "a")
    assert weight("uid-1", "a") != weight("uid-1", "b")
    assert weight("k", "m") == 0x20B0BCEF9F3D4E32  # pinned: replicas of two versions agree


@pytest.mark.parametrize("members", [["a", "b"], ["a", "b", "c"], ["r1", "r2", "r3", "r4", "r5"]])
def test_keys_split_about_evenly(members: list[str]) -> None:
    counts = {m: 0 for m in members}
    for k in KEYS:
        counts[owner(k, members)] += 1  # type: ignore[index]
    share = len(KEYS) / len(members)
    assert all(0.85 * share < c < 1.15 * share for c in counts.values()), counts


@pytest.mark.parametrize("before, after", [
    pytest.param(["a", "b"], ["a", "b", "c"], id="join"),
    pytest.param(["a", "b", "c"], ["a", "c"], id="leave"),
    pytest.param(["a", "b", "c", "d"], ["a", "b", "c", "d", "e"], id="fifth"),
])
def test_a_change_of_one_member_moves_about_one_nth_and_only_to_or_from_it(
        before: list[str], after: list[str]) -> None:
    changed = (set(before) ^ set(after)).pop()
    moved = [k for k in KEYS if owner(k, before) != owner(k, after)]
    n = max(len(before), len(after))
    assert 0.8 * len(KEYS) / n < len(moved) < 1.2 * len(KEYS) / n
    assert all(changed in (owner(k, before), owner(k, after)) for k in moved)


def test_owner_of_nobody_is_none_and_order_does_not_matter() -> None:
    assert owner("k", []) is None
    assert all(owner(k, ["a", "b", "c"]) == owner(k, ["c", "a", "b"]) for k in KEYS[:200])


# -- membership --------------------------------------------------------------------------------
@pytest.mark.parametrize("now, expected", [
    pytest.param(5.9, False, id="before-settle"),
    pytest.param(6.0, True, id="at-settle"),
    pytest.param(14.9, True, id="renewed-recently"),
    pytest.param(15.0, False, id="own-lease-may-have-expired"),
])
def test_a_single_replica_acts_after_settle_and_stops_when_it_cannot_renew(
        now: float, expected: bool) -> None:
    m = joined("a", [lease("a")])
    assert m.owns("uid-1", now) is expected


@pytest.mark.parametrize("b_renews, now, b_live", [
    pytest.param(["t0"], 14.0, True, id="seen-14s-ago"),
    pytest.param(["t0"], 15.0, False, id="not-renewed-for-a-duration"),
    pytest.param(["t0", "t1"], 24.0, True, id="renewed-at-10"),
    pytest.param(["t0", "t0"], 24.0, False, id="same-renew-time-is-no-renewal"),
])
def test_peers_are_live_while_their_renew_time_changes_on_the_local_clock(
        b_renews: list[str], now: float, b_live: bool) -> None:
    m = Membership("a", lease_seconds=15, settle=6)
    for i, renew in enumerate(b_renews):
        m = m.observe([lease("a", f"a{i}"), lease("b", renew)], now=10.0 * i, renewed=True)
    m = m.observe([lease("a", "a-last"), lease("b", b_renews[-1])], now=now, renewed=True)
    assert ("b" in m.live(now)) is b_live


def test_released_leases_are_not_members() -> None:
    m = joined("a", [lease("a"), lease("b", holder="")])
    assert m.live(0.0) == frozenset({"a"})


def test_a_joiner_takes_its_share_only_after_settle_and_the_old_owner_stops_at_once() -> None:
    a = joined("a", [lease("a")])
    a = a.observe([lease("a", "1")], now=10, renewed=True)
    assert all(a.owns(k, 10) for k in KEYS[:300])
    # b joins at 12: a sees it at its next listing (13) and stops acting on b's share at once
    b = joined("b", [lease("a", "1"), lease("b")], at=12)
    a = a.observe([lease("a", "2"), lease("b")], now=13, renewed=True)
    bs = [k for k in KEYS[:300] if owner(k, ["a", "b"]) == "b"]
    assert 100 < len(bs) < 200
    assert not any(a.owns(k, 13) for k in bs)
    assert all(a.owns(k, 13) for k in KEYS[:300] if k not in bs)
    # b: nothing before 12 + settle, its share from then on; never a key a still acts on
    assert not any(b.owns(k, 17.9) for k in KEYS[:300])
    b = b.observe([lease("a", "2"), lease("b", "1")], now=15, renewed=True)
    assert [k for k in KEYS[:300] if b.owns(k, 18)] == bs


def test_a_dead_peers_share_moves_after_its_lease_expires_plus_settle() -> None:
    a = joined("a", [lease("a"), lease("b")])
    theirs = [k for k in KEYS[:300] if owner(k, ["a", "b"]) == "b"]
    for t in (3, 6, 9, 12):  # b renewed last at 0 (then SIGKILLed)
        a = a.observe([lease("a", str(t)), lease("b")], now=t, renewed=True)
        assert not any(a.owns(k, t) for k in theirs)
    for t in (15, 18):
        a = a.observe([lease("a", str(t)), lease("b")], now=t, renewed=True)
    assert not any(a.owns(k, 20.9) for k in theirs)  # expired at 15, seen at 15: settle to 21
    assert all(a.owns(k, 21) for k in theirs)


def test_a_fenced_replica_rejoins_only_after_settle() -> None:
    a = joined("a", [lease("a")])
    a = a.observe([lease("a", "x")], now=20, renewed=False)  # renewals failed since 0
    assert not a.owns("uid-1", 20) and a.live(20) == frozenset()
    a = a.observe([lease("a", "y")], now=23, renewed=True)
    assert not a.owns("uid-1", 28.9)
    assert a.owns("uid-1", 29)


def test_stale_leases_of_dead_replicas_are_named_for_deletion_never_its_own() -> None:
    a = joined("a", [lease("a"), lease("b"), lease("c")])
    a = a.observe([lease("a", "2"), lease("b", "2"), lease("c")], now=59, renewed=True)
    assert a.stale(59) == []
    a = a.observe([lease("a", "3"), lease("b", "3"), lease("c")], now=61, renewed=True)
    assert a.stale(61) == ["c"]
