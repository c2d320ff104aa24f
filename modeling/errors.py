"""The two exceptions the scripts turn into exit statuses (modeling/flags.py
run_script; the statuses are in tasks/common.py).

Here, outside tasks/, because the library raises them (the training loop on
SIGTERM, data generation on bad input) and the core never imports tasks/.
Imports nothing.
"""

# The exit status after SIGTERM with the state saved: 128 + 15, as if the
# signal had killed the process (what schedulers expect from a preempted
# job). tasks/common.py's EXIT_INTERRUPTED; here because the training loop
# also exits with it directly when its input is stuck.
EXIT_INTERRUPTED = 143


class Interrupted(Exception):
    """The run stopped early on request (SIGTERM) after saving its state;
    re-running the same command resumes. The Trainer's TrainingInterrupted
    is one."""


class Terminated(Interrupted):
    """SIGTERM outside the training loop (modeling/flags.py run_script
    raises it in the main thread): every `with` block on the way out
    removes its temporary files, folders and worker processes; nothing
    partial is published. Re-running the command starts that step over."""


class UserError(ValueError):
    """A mistake the user can fix (a flag, an input file); its message says
    what and where. Any ValueError raised by this repository's own code is
    treated the same way by the scripts; this class marks one raised from
    elsewhere (or deliberately) as such."""
