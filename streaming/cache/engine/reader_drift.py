"""A reader that runs too far ahead of the slowest reader of its job on the node waits for it
(the bound and why: `policy.drift_bound`), for at most a deadline."""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass

from streaming.cache.table.reader_slot import ReaderSlot
from streaming.coord.wait import Flag, wait_for
from streaming.errors import DeadlineExceeded

log = logging.getLogger(__name__)

DRIFT_WAIT = 60.0  # seconds a reader waits for the slowest reader of its job


def job_word(job: str | None) -> int:
    """A job's name as a nonzero int64 word of the node table (0 for None: no job).

    Args:
        job: the job's name (its dataset's job namespace on the node).
    """
    if job is None:
        return 0
    word = int.from_bytes(hashlib.blake2b(job.encode(), digest_size=8).digest(), "little",
                          signed=True)
    return word or 1


@dataclass
class ReaderDrift:
    """One reader's place among the readers of its job, and the lead it may take.

    Args:
        job: the reader's job (`job_word`; 0: it never waits).
        wait: seconds it waits at most; then it goes on, and waits no more this pass, with a
            warning (a reader held up elsewhere, by an evaluation or a stalled rank, must not
            stall the whole job).
        steps: the steps it may lead the slowest reader of its job (None: no bound).
        pass_no: the pass (epoch + 1) it reads.
    """

    job: int = 0
    wait: float = DRIFT_WAIT
    steps: int | None = None
    pass_no: int = 1
    bounded: bool = True  # False once a wait reached its deadline this pass

    def begin(self, epoch: int) -> None:
        """The reader's next pass is epoch `epoch`'s (readers of a job compare their steps
        within a pass; one still in an earlier pass is behind).

        Args:
            epoch: the epoch.
        """
        self.pass_no = int(epoch) + 1

    def enter(self, slot: ReaderSlot) -> None:
        """The reader starts its pass `pass_no` at step 0.

        Args:
            slot: the reader's slot.
        """
        slot.enter_pass(self.job, self.pass_no)
        self.bounded = True

    def hold(self, slot: ReaderSlot, position: int, flag: Flag | None) -> None:
        """Wait while the reader, at `position`, is more than `steps` ahead of the slowest
        running reader of its job (raising `flag`'s error if the node fails meanwhile).

        Args:
            slot: the reader's slot.
            position: its step.
            flag: the node's failure flag.
        """
        bound = self.steps
        if not self.job or bound is None or not self.bounded:
            return
        if slot.lead(self.job, self.pass_no, position) <= bound:
            return
        try:
            wait_for(lambda: slot.lead(self.job, self.pass_no, position) <= bound or None,
                     what="slower readers", timeout=self.wait, poll=0.01, flag=flag)
        except DeadlineExceeded:
            log.warning("cache: reader %d has waited %g s for the slowest reader of its job, "
                        "%d steps behind it (bound %d steps); it goes on without waiting for "
                        "the rest of this pass", slot.index, self.wait,
                        slot.lead(self.job, self.pass_no, position), bound)
            self.bounded = False
