"""evaluate.signals_held: SIGINT / SIGTERM raised inside the block reach the handlers there were
before only when it ends, from the block's own frame, each once, and a second signal is still
delivered when the first handler raises (before, raising the first again dropped the second)."""

import signal

import pytest

from dlclusterenv.evaluate import signals_held


@pytest.fixture
def handlers():
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    yield
    for s, h in saved.items():
        signal.signal(s, h)


def test_sigint_inside_raises_at_the_end_of_the_block_from_it(handlers):
    signal.signal(signal.SIGINT, signal.default_int_handler)
    done = []
    with pytest.raises(KeyboardInterrupt) as info:
        with signals_held():
            signal.raise_signal(signal.SIGINT)
            signal.raise_signal(signal.SIGINT)
            done.append("rest of the block")
    assert done == ["rest of the block"]
    assert any(entry.name == "signals_held" for entry in info.traceback)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_second_signal_is_delivered_after_the_first_handler_raises(handlers):
    seen = []
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, lambda s, f: seen.append(s))
    with pytest.raises(KeyboardInterrupt):
        with signals_held():
            signal.raise_signal(signal.SIGINT)
            signal.raise_signal(signal.SIGTERM)
    for _ in range(1000):  # Python runs the re-raised SIGTERM's handler at its next check
        if seen:
            break
    assert seen == [signal.SIGTERM]


def test_an_ignored_signal_stays_ignored(handlers):
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with signals_held():
        signal.raise_signal(signal.SIGINT)
    assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN
