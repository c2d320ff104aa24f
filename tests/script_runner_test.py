"""tests/script_runner.py: a program run through `python()` behaves as
`python <args>` in a new process (argv, streams, exit status, environment,
working folder), whether it is forked from the warm interpreter or not."""

import os
import signal

import script_runner

ECHO = (
    "import os, sys\n"
    "print(sys.argv, os.getcwd())\n"
    "print('to stderr', file=sys.stderr)\n"
    "sys.exit(int(sys.argv[1]))\n"
)


def test_argv_streams_cwd_and_exit_status(tmp_path):
    proc = script_runner.python(["-c", ECHO, "3", "b"], cwd=tmp_path)
    assert proc.returncode == 3
    assert proc.stdout == f"['-c', '3', 'b'] {tmp_path}\n"
    assert proc.stderr == "to stderr\n"


def test_a_script_runs_as_main_with_its_folder_on_the_path(tmp_path):
    (tmp_path / "helper.py").write_text("VALUE = 7\n")
    script = tmp_path / "prog.py"
    script.write_text(
        "import sys, helper\n"
        "print(__name__, sys.argv[1:], helper.VALUE)\n"
        "sys.exit('error: bad flag')\n"
    )
    proc = script_runner.python([script, "--x=1"])
    assert proc.stdout == "__main__ ['--x=1'] 7\n"
    assert proc.returncode == 1
    assert proc.stderr.strip() == "error: bad flag"


def test_an_uncaught_exception_prints_its_traceback():
    proc = script_runner.python(["-c", "raise KeyError('lost')"])
    assert proc.returncode == 1
    assert "Traceback" in proc.stderr and "KeyError: 'lost'" in proc.stderr


def test_a_signal_ends_it_as_a_process(tmp_path):
    code = "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"
    proc = script_runner.python(["-c", code])
    assert proc.returncode == -signal.SIGKILL


def test_its_environment_and_settings_read_at_import():
    """Added variables reach the program; a variable TensorFlow reads when
    it is imported gets an interpreter that imports it afresh, as `python`
    would (the warm one imported TensorFlow with the test's settings)."""
    code = (
        "import os, sys\n"
        "print(os.environ.get('BERT_TEST_VALUE'),"
        " os.environ.get('TF_CPP_MIN_LOG_LEVEL'),"
        " 'tensorflow' in sys.modules)\n"
    )
    level = os.environ.get("TF_CPP_MIN_LOG_LEVEL")
    warm = script_runner.python(["-c", code], env={"BERT_TEST_VALUE": "a"})
    assert warm.stdout.split() == ["a", str(level), "True"]
    other = "1" if level != "1" else "3"
    fresh = script_runner.python(
        ["-c", code], env={"TF_CPP_MIN_LOG_LEVEL": other}
    )
    assert fresh.stdout.split() == ["None", other, "False"]
