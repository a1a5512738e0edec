"""`taskqueue enqueue`'s report of a push stopped midway: the ids of the tasks pushed and which
inputs were not pushed (the input on real processes: tests/redis/cli/test_enqueue_input.py)."""

from __future__ import annotations

import pytest

from taskqueue.cli.enqueue import Item, report


def _stdin(*numbers: int) -> list[Item]:
    return [Item(text="p", stdin=True, number=n) for n in numbers]


@pytest.mark.parametrize(("items", "fates", "says"), [
    pytest.param(_stdin(1, 2, 3, 4), ["pushed", "pushed", "refused", "unsent"],
                 "pushed 2 of 4 task(s) (their ids are on stdout); stdin line 3: refused; "
                 "stdin line 4: not sent; push stdin lines 3-4 again", id="refused-then-unsent"),
    pytest.param(_stdin(1, 2, 5, 6, 7), ["pushed", "unknown", "unknown", "unsent", "unsent"],
                 "pushed 1 of 5 task(s) (their ids are on stdout); stdin lines 2, 5: sent "
                 "without a reply: they may or may not be in the queue (look before pushing "
                 "them again); stdin lines 6-7: not sent; push stdin lines 6-7 again",
                 id="no-reply-blank-line-between"),
    pytest.param([Item("a", stdin=False, number=1), *_stdin(1, 2),
                  Item("b", stdin=False, number=3)],
                 ["existing", "refused", "pushed", "refused"],
                 "pushed 2 of 4 task(s) (their ids are on stdout); PAYLOAD 3, stdin line 1: "
                 "refused; push PAYLOAD 3, stdin line 1 again", id="arguments-and-stdin"),
    pytest.param(_stdin(1, 2), ["unconfirmed", "unsent"],
                 "pushed 1 of 2 task(s) (their ids are on stdout); stdin line 1: pushed, not "
                 "confirmed by the replicas; stdin line 2: not sent; push stdin line 2 again",
                 id="durable-not-confirmed"),
    pytest.param(_stdin(1), ["unknown"],
                 "pushed 0 of 1 task(s); stdin line 1: sent without a reply: they may or may "
                 "not be in the queue (look before pushing them again)", id="nothing-pushed"),
])
def test_the_report_of_a_push_stopped_midway(items: list[Item], fates: list[str],
                                             says: str) -> None:
    assert report(items, fates, ids=True) == says
