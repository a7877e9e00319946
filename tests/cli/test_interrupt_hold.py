"""Ctrl-C held across steps that must not be cut apart: real SIGINTs to this process."""

from __future__ import annotations

import signal

import pytest

from jobhost.cli._one_shot import InterruptHold


def test_a_ctrl_c_while_held_is_raised_where_it_is_delivered() -> None:
    before = signal.getsignal(signal.SIGINT)
    steps = []
    with InterruptHold() as hold:
        signal.raise_signal(signal.SIGINT)
        steps.append("held past the signal")
        with pytest.raises(KeyboardInterrupt):
            hold.deliver()
    assert steps == ["held past the signal"]
    assert signal.getsignal(signal.SIGINT) is before


def test_a_ctrl_c_not_delivered_by_hand_is_raised_at_the_end_of_the_block() -> None:
    with pytest.raises(KeyboardInterrupt), InterruptHold():
        signal.raise_signal(signal.SIGINT)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_without_a_ctrl_c_delivering_raises_nothing_and_restores_the_handler() -> None:
    with InterruptHold() as hold:
        hold.deliver()
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    with pytest.raises(KeyboardInterrupt):
        signal.raise_signal(signal.SIGINT)


def test_a_block_that_fails_keeps_its_error_and_gives_ctrl_c_back() -> None:
    with pytest.raises(RuntimeError, match="the claim failed"), InterruptHold():
        signal.raise_signal(signal.SIGINT)
        raise RuntimeError("the claim failed")
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    with pytest.raises(KeyboardInterrupt):
        signal.raise_signal(signal.SIGINT)


def test_an_ignored_ctrl_c_stays_ignored() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with InterruptHold() as hold:
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
            signal.raise_signal(signal.SIGINT)
            hold.deliver()
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
