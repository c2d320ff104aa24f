"""Progress lines for long loops: counts, rate and ETA, every few seconds.

    progress = Progress("Writing train.tf_record", total=len(examples))
    for example in examples:
        ...
        progress.add()
    progress.finish()

logs (absl INFO) at most every `every_secs` seconds, and once at the end:

    Writing train.tf_record: 1200/3668 examples (33%), 512.3 examples/s, ETA 5s

Imports neither TensorFlow nor Keras (data generation uses it).
"""

import time

from absl import logging

# How often a long loop logs by default (the training loop's interval too).
EVERY_SECS = 30.0


def format_seconds(seconds):
    """12s, 3m05s, 2h07m; "?" when unknown."""
    if seconds is None:
        return "?"
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


class Progress:
    """Counts work done and logs it with a rate and an ETA.

    Args:
      what: what is being done ("Evaluating", "Writing eval.tf_record").
      total: the count at the end, if known (for the percentage and ETA).
      unit: what is counted ("examples", "batches").
      every_secs: the least time between two lines.
    """

    def __init__(self, what, total=None, unit="examples", every_secs=None):
        self.what = what
        self.total = total
        self.unit = unit
        self.every_secs = EVERY_SECS if every_secs is None else every_secs
        self.done = 0
        self.start = self._last = time.monotonic()
        self.lines = 0

    def add(self, count=1):
        self.done += count
        now = time.monotonic()
        if now - self._last >= self.every_secs:
            self._log(now)

    def finish(self):
        """Logs the final count (once) and returns it."""
        self._log(time.monotonic(), final=True)
        return self.done

    def _log(self, now, final=False):
        self._last = now
        self.lines += 1
        elapsed = max(now - self.start, 1e-9)
        rate = self.done / elapsed
        if self.total:
            count = (
                f"{self.done}/{self.total} {self.unit} "
                f"({100.0 * self.done / self.total:.0f}%)"
            )
        else:
            count = f"{self.done} {self.unit}"
        if final:
            tail = f"done in {format_seconds(elapsed)}"
        elif self.total and rate > 0:
            tail = f"ETA {format_seconds((self.total - self.done) / rate)}"
        else:
            tail = "ETA ?"
        logging.info(
            "%s: %s, %.1f %s/s, %s", self.what, count, rate, self.unit, tail
        )
