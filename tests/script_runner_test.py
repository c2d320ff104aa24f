"""tests/script_runner.py: a program run through `python()` behaves as
`python <args>` in a new process (argv, streams, exit status, environment,
working folder, signals), though it is forked from a warm interpreter."""

import signal
import subprocess

import pytest
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
    """Added variables reach the program; a run that sets a variable read
    when Keras is imported (its backend) gets a warm interpreter that
    imported Keras with it, as `python` would."""
    pytest.importorskip("jax", reason="jax is not installed (the test extra)")
    code = (
        "import os, sys\n"
        "print(os.environ.get('BERT_TEST_VALUE'),"
        " 'keras' in sys.modules)\n"
        "import keras\n"
        "print(keras.backend.backend())\n"
    )
    warm = script_runner.python(["-c", code], env={"BERT_TEST_VALUE": "a"})
    assert warm.stdout.split() == ["a", "True", "tensorflow"]
    jax = script_runner.python(["-c", code], env={"KERAS_BACKEND": "jax"})
    assert jax.stdout.split() == ["None", "True", "jax"], jax.stderr


STREAMING = (
    "import signal, sys, time\n"
    "print('on stdout', flush=True)\n"
    "print('started', file=sys.stderr)\n"
    "time.sleep(60)\n"
)


@pytest.mark.parametrize("warm", [True, False], ids=["warm", "fresh"])
def test_popen_streams_stderr_and_takes_signals(warm, monkeypatch):
    """A program started by popen writes its stderr as it runs, takes a
    signal, and gives -N after it; communicate reads both streams. The
    same from a fresh interpreter (platforms other than Linux)."""
    monkeypatch.setattr(script_runner, "WARM", warm and script_runner.WARM)
    child = script_runner.popen(["-c", STREAMING], stdout=subprocess.PIPE)
    assert child.stderr.readline() == "started\n"
    assert child.poll() is None
    child.send_signal(signal.SIGTERM)
    out, err = child.communicate(timeout=30)
    assert child.returncode == -signal.SIGTERM
    assert out == "on stdout\n" and err == ""
    child = script_runner.popen(["-c", "import sys; sys.exit(4)"])
    assert child.wait(timeout=30) == 4
    slow = script_runner.popen(["-c", STREAMING])
    with pytest.raises(subprocess.TimeoutExpired):
        slow.wait(timeout=0.5)
    slow.kill()
    assert slow.wait(timeout=30) == -signal.SIGKILL
