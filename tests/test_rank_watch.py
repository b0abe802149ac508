"""The rank watch names the rank a job waits for, from the store alone: frozen ranks (no sign of life), ranks alive
but behind, this rank itself when the others went on. A dict stands in for the job's store and the clock is the
test's; tests/test_external_launch.py freezes a real rank of a torchrun job."""

from __future__ import annotations

import re

import pytest

from mjfleet.runtime.peers import is_peer_failure
from mjfleet.runtime.watch import RankWatch


class DictStore:
    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}

    def set(self, key: str, value: str) -> None:
        self.data[key] = value.encode()

    def get(self, key: str) -> bytes:
        return self.data[key]

    def check(self, keys: list[str]) -> bool:
        return all(k in self.data for k in keys)


class Rank:
    """One rank's place and watch over a shared store, on the test's clock."""

    def __init__(self, store: DictStore, rank: int, clock: list[float]) -> None:
        self.key: tuple[int, ...] = (1, 0, 0)
        self.where = "iteration 1, collecting (step 0 of 24)"
        self.hung: list[str] = []
        self.watch = RankWatch(store, rank, 3, 30.0, lambda: (self.key, self.where), self.hung.append, lambda: clock[0])

    def at(self, key: tuple[int, ...], where: str) -> None:
        self.key, self.where = key, where


@pytest.fixture
def job() -> tuple[list[float], list[Rank]]:
    clock = [0.0]
    store = DictStore()
    return clock, [Rank(store, r, clock) for r in range(3)]


def _tick(clock: list[float], ranks: list[Rank], seconds: float, looking: list[int]) -> list[str | None]:
    """``seconds`` pass in steps of 3 s; the ranks in ``looking`` (the others are frozen) look after each."""
    said: list[str | None] = []
    for _ in range(int(seconds // 3)):
        clock[0] += 3.0
        said = [ranks[r].watch.look() for r in looking]
    return said


def test_nothing_is_said_while_every_rank_moves(job: tuple[list[float], list[Rank]]) -> None:
    clock, ranks = job
    for it in range(1, 30):
        for rank in ranks:
            rank.at((it, 0, 1), f"iteration {it}")
        assert _tick(clock, ranks, 3, [0, 1, 2]) == [None, None, None]


def test_a_frozen_rank_is_named_with_where_it_stopped(job: tuple[list[float], list[Rank]]) -> None:
    clock, ranks = job
    for rank in ranks:
        rank.at((5, 1, 3), "iteration 5, its update (gradient all-reduce 3)")
    _tick(clock, ranks, 6, [0, 1, 2])
    # Rank 2 stops (SIGSTOP): its thread too. The others wait in the next all-reduce.
    ranks[0].at((5, 1, 4), "iteration 5, its update (gradient all-reduce 4)")
    ranks[1].at((5, 1, 4), "iteration 5, its update (gradient all-reduce 4)")
    said = _tick(clock, ranks, 27, [0, 1])
    assert said == [None, None]  # 27 s < 30 s
    said = _tick(clock, ranks, 6, [0, 1])
    assert said[0] is not None and re.fullmatch(
        r"rank 2 did not arrive within 30 s \(--collective-timeout-s\): rank 2: no sign of life for 3\d s \(stopped,"
        r" frozen or gone\), last at iteration 5, its update \(gradient all-reduce 3\); rank 0 waited 3\d s at"
        r" iteration 5, its update \(gradient all-reduce 4\)",
        said[0],
    )


def test_a_rank_alive_but_behind_is_named(job: tuple[list[float], list[Rank]]) -> None:
    clock, ranks = job
    ranks[0].at((7, 1, 1), "iteration 7, its update (gradient all-reduce 1)")
    ranks[1].at((7, 1, 1), "iteration 7, its update (gradient all-reduce 1)")
    ranks[2].at((6, 2, 0), "iteration 6, after its update")  # stuck in a hook, its thread alive
    said = _tick(clock, ranks, 33, [0, 1, 2])
    assert said[0] is not None and said[2] is None  # the waiting ranks speak first
    assert said[0].startswith("rank 2 did not arrive within 30 s (--collective-timeout-s): rank 2: alive but still at")
    said = _tick(clock, ranks, 15, [0, 1, 2])  # were the others gone (they end the job), rank 2 would say it
    assert said[2] == (
        "rank 2 did not move on within 30 s (--collective-timeout-s): it stands at iteration 6, after its update"
        " while the others went on"
    )


def test_errors_are_peer_losses_only_when_torch_distributed_raised_them() -> None:
    import torch.distributed as dist

    assert is_peer_failure(dist.DistNetworkError("Connection closed by peer"))
    # gloo's timeout is a RuntimeError raised from torch.distributed's own code.
    gloo = compile(
        "raise RuntimeError('[gloo] Timed out waiting 30000ms for recv')", "/x/torch/distributed/c.py", "exec"
    )
    with pytest.raises(RuntimeError) as raised:
        exec(gloo)
    assert is_peer_failure(raised.value)
    try:
        try:
            exec(gloo)
        except RuntimeError as inner:
            raise RuntimeError("training step failed") from inner
    except RuntimeError as outer:
        assert is_peer_failure(outer)
    # The same words from anywhere else are this rank's own failure.
    assert not is_peer_failure(TimeoutError("HTTPSConnectionPool(host='api.wandb.ai'): Read timed out."))
    assert not is_peer_failure(RuntimeError("[gloo] Connection closed by peer [127.0.0.1]:1"))
    assert not is_peer_failure(ConnectionResetError("Connection reset by peer"))
    # A store whose port another process holds is this rank's setup, not a lost peer.
    assert not is_peer_failure(dist.DistNetworkError("The server socket has failed to listen: address already in use"))
