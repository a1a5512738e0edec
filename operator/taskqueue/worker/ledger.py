"""What one consume slot owes Redis for the entries it runs: the one ack loop of the thread slots
(`slot.Slot`) and the coroutine slots (`aslot.AsyncSlot`).

A slot runs a delivery entry by entry (`Ledger.entries`); once the worker stops, a slot whose
entries are held runs no more of them, and the rest is given back unrun (`unrun`, attempts
unchanged). After each entry (`ran`): a held entry that succeeded is owed as an ack (`acks`),
which rides on the slot's next post to the dispatcher (the slot starts a new `acks` list once
the dispatcher took them) or, when the dispatcher has closed, goes over the slot's own
connection (`lastcalls.flush_acks`); a held
entry that ended any other way was taken out of the processing list by its script (fail.lua,
claim.lua, complete.lua) and is forgotten from the worker's held entries at once. Unheld entries
(AtMostOnce) owe nothing, unless the task index is kept (`done_marks`, spec.worker.tracking):
then one that succeeded rides the same way as an ack that marks it done (fetch.lua unheld).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from taskqueue.worker.state import WorkerState


class Ledger:
    """The acks one slot owes and the entries it will not run (a plain class: start-up time)."""

    __slots__ = ("acks", "done_marks", "held", "state", "unrun")

    def __init__(self, *, held: bool, state: WorkerState, done_marks: bool = False) -> None:
        self.held = held
        self.done_marks = done_marks and not held
        """Unheld entries that succeeded are owed as done marks (the task index)."""
        self.state = state
        self.acks: list[str] = []
        """Entries run successfully and not yet acked (held entries, or done marks)."""
        self.unrun: list[str] = []
        """The rest of a delivery left when the worker stopped (to give back)."""

    def entries(self, delivery: list[str]) -> Iterable[str]:
        """The entries of `delivery` to run, in turn; held ones stop when the worker stops,
        the rest left in `unrun`. A delivery of one entry (prefetch 1) is looked at once, here:
        no generator per task."""
        if not self.held:
            return delivery
        if len(delivery) == 1:
            if self.state.stopping.is_set():
                self.unrun = delivery
                return ()
            return delivery
        return self._held_entries(delivery)

    def _held_entries(self, delivery: list[str]) -> Iterator[str]:
        for i, entry in enumerate(delivery):
            if self.state.stopping.is_set():
                self.unrun = delivery[i:]
                return
            yield entry

    def ran(self, entry: str, *, ack: bool) -> None:
        """`entry` ran: with `ack` it is owed as an ack; otherwise its script took it out of the
        processing list already."""
        if not self.held:
            if ack and self.done_marks:
                self.acks.append(entry)
            return
        if ack:
            self.acks.append(entry)
        else:
            self.state.unhold((entry,))

    def take_unrun(self) -> list[str]:
        unrun, self.unrun = self.unrun, []
        return unrun
