"""The two exceptions the scripts turn into exit statuses (modeling/flags.py
run_script; the statuses are in tasks/common.py).

Here, outside tasks/, because the library raises them (the training loop on
SIGTERM, data generation on bad input) and the core never imports tasks/.
Imports nothing.
"""


class Interrupted(Exception):
    """The run stopped early on request (SIGTERM) after saving its state;
    re-running the same command resumes. The Trainer's TrainingInterrupted
    is one."""


class UserError(ValueError):
    """A mistake the user can fix (a flag, an input file); its message says
    what and where. Any ValueError raised by this repository's own code is
    treated the same way by the scripts; this class marks one raised from
    elsewhere (or deliberately) as such."""
