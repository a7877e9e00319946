"""How much a host may claim ahead of its free workers: a fifth of a second of work at the pace
of its recent runs, at most 16 runs a worker, nothing before a run was timed."""

from __future__ import annotations

from jobhost.firing.slots import MOST_PER_WORKER, AheadQueue


def test_nothing_is_claimed_ahead_before_a_run_was_timed() -> None:
    queue: AheadQueue[str] = AheadQueue(8)
    assert queue.bound == 0 and queue.room() == 0


def test_the_bound_is_the_work_the_workers_start_within_the_horizon() -> None:
    queue: AheadQueue[str] = AheadQueue(8)
    queue.timed(0.1)  # 8 workers, 0.1 s a run: 16 runs start within 0.2 s
    assert queue.bound == 16
    for _ in range(30):
        queue.timed(5.0)  # long runs pull the mean up within tens of runs: no room ahead
    assert queue.bound == 0


def test_short_runs_fill_at_most_a_few_runs_a_worker() -> None:
    queue: AheadQueue[str] = AheadQueue(4)
    queue.timed(0.00001)
    assert queue.bound == MOST_PER_WORKER * 4


def test_room_shrinks_as_runs_wait_and_the_oldest_leaves_first() -> None:
    queue: AheadQueue[str] = AheadQueue(1)
    queue.timed(0.05)  # 4 runs ahead
    queue.extend("abc")
    assert queue.room() == 1 and not queue.low()
    assert queue.popleft() == "a"
    assert queue.low()  # 2 of 4 waiting: worth a claim
    queue.clear()
    assert queue.room() == 4
