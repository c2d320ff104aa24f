"""run_pretraining.py --backend=jax: the same records, flags and checkpoints
as the TensorFlow backend, and checkpoints that cross between them.

Every run starts from one original-format checkpoint (--init_checkpoint):
the backends draw different random initial weights.
- 4 and 40 steps under JAX equal TensorFlow's within float32 accumulation;
- a JAX checkpoint resumed by TensorFlow, and a TensorFlow checkpoint
  resumed by JAX (killed with SIGKILL on the way, then run again), end
  where the uninterrupted runs of the other backend end;
- two processes (as two hosts run) equal one, stop together when one of
  them gets SIGTERM, and resume;
- run_classifier.py on MRPC-shaped data from MiniLM (its first 2 layers), dropout off: the
  checkpoint, dev metrics and test probabilities equal TensorFlow's.
"""

import json
import os
import shutil
import signal
import time

import numpy as np
import pytest
import script_runner
import tolerance
import training_helpers as helpers

from modeling import checkpoints
from modeling import config as config_lib

pytest.importorskip("jax", reason="jax is not installed (the test extra)")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "run_pretraining.py")
STEPS = 40
LEARNING_RATE = 1e-3
# 40 updates at learning rate 1e-3 from one start: the backends' float32
# sums differ in their last bits (1.2e-7 after 4 steps, measured here), and
# still hold to float32 accumulation's tolerance at step 40 (the
# differences do not grow past it); a data position off by one batch moves
# every weight by ~1e-3.
TRAINED_REL = tolerance.FLOAT32_REL


def _run(output_dir, backend, *extra, wait=True, env=None):
    args = [
        SCRIPT,
        f"--bert_config_file={_INPUTS['config']}",
        f"--input_file={_INPUTS['records']}",
        f"--init_checkpoint={_INPUTS['init']}",
        f"--output_dir={output_dir}",
        f"--backend={backend}",
        "--max_seq_length=16",
        "--max_predictions_per_seq=4",
        "--train_batch_size=8",
        f"--learning_rate={LEARNING_RATE}",
        "--random_seed=3",
        "--do_train",
        f"--num_train_steps={STEPS}",
        "--num_warmup_steps=4",
        "--save_checkpoints_steps=4",
        "--iterations_per_loop=4",
        f"--keep_checkpoint_max={STEPS}",
        *extra,
    ]
    # KERAS_BACKEND as --backend sets it (a TensorFlow run is forked from
    # the warm interpreter, a JAX run gets one of its own).
    env = dict(
        PYTHONPATH=ROOT,
        TF_CPP_MIN_LOG_LEVEL="2",
        KERAS_BACKEND=backend,
        **(env or {}),
    )
    if not wait:
        return script_runner.popen(args, env=env)
    proc = script_runner.python(args, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


_INPUTS = {}


def _initial_checkpoint(config_path, prefix):
    """A random original-format checkpoint of the tiny pre-training model,
    written without either backend."""
    config = config_lib.BertConfig.from_json_file(config_path)
    rng = np.random.default_rng(0)
    arrays = {}
    for name, shape in checkpoints.original_variable_shapes(config).items():
        leaf = name.rsplit("/", 1)[-1]
        if leaf == "gamma":
            arrays[name] = np.ones(shape, np.float32)
        elif leaf in ("beta", "bias", "output_bias"):
            arrays[name] = np.zeros(shape, np.float32)
        else:
            arrays[name] = rng.normal(0, 0.02, shape).astype(np.float32)
    return checkpoints.write_checkpoint(prefix, arrays)


def _step(prefix_dir, step):
    return checkpoints.read_checkpoint(str(prefix_dir / f"model.ckpt-{step}"))


def _steps_written(directory):
    return sorted(
        int(f.split("-")[1].split(".")[0])
        for f in os.listdir(directory)
        if f.startswith("model.ckpt-") and f.endswith(".index")
    )


def _only_checkpoint(source, step, target):
    """A folder holding only `source`'s checkpoint of `step`: a run resumed
    from there."""
    target.mkdir()
    for name in os.listdir(source):
        if name.startswith(f"model.ckpt-{step}."):
            shutil.copy(source / name, target / name)
    return target


def _assert_close(actual, desired, rel, what, learning_rate=LEARNING_RATE):
    tolerance.assert_checkpoints_close(
        actual, desired, rel, what, learning_rate
    )


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """TensorFlow and JAX from the same initial checkpoint, 40 steps each."""
    root = tmp_path_factory.mktemp("backends")
    _INPUTS["config"] = helpers.tiny_config(root / "bert_config.json")
    _INPUTS["records"] = helpers.write_records(root / "data.tfrecord")
    _INPUTS["init"] = _initial_checkpoint(
        _INPUTS["config"], str(root / "init" / "bert_model.ckpt")
    )
    _run(root / "tf", "tensorflow")
    _run(root / "jax", "jax")
    return root


def test_jax_run_equals_the_tensorflow_run(runs):
    assert _steps_written(runs / "jax") == list(range(4, STEPS + 1, 4))
    # 4 steps: the original's arithmetic on both; float32 rounding apart.
    _assert_close(
        _step(runs / "jax", 4),
        _step(runs / "tf", 4),
        tolerance.FLOAT32_REL,
        "4 steps",
    )
    _assert_close(
        _step(runs / "jax", STEPS),
        _step(runs / "tf", STEPS),
        TRAINED_REL,
        f"{STEPS} steps",
    )


def test_tensorflow_resumes_a_jax_checkpoint(runs, tmp_path):
    resumed = _only_checkpoint(runs / "jax", 8, tmp_path / "resumed")
    proc = _run(resumed, "tensorflow")
    assert "Resumed from" in proc.stderr
    assert "model.ckpt-8" in proc.stderr
    _assert_close(
        _step(resumed, STEPS), _step(runs / "tf", STEPS), TRAINED_REL, "resumed"
    )


def test_jax_resumes_a_tensorflow_checkpoint_after_sigkill(runs, tmp_path):
    """TensorFlow's step-8 checkpoint, resumed by JAX, killed mid-way, run
    again: it ends where the uninterrupted JAX run ends."""
    resumed = _only_checkpoint(runs / "tf", 8, tmp_path / "resumed")
    child = _run(resumed, "jax", "--save_checkpoints_steps=2", wait=False)
    deadline = time.time() + 300
    while child.poll() is None and time.time() < deadline:
        if _steps_written(resumed)[-1] >= 12:
            break
        time.sleep(0.005)
    child.send_signal(signal.SIGKILL)
    child.communicate()
    assert child.returncode == -signal.SIGKILL, "finished before the kill"
    killed_at = _steps_written(resumed)[-1]
    assert 12 <= killed_at < STEPS
    proc = _run(resumed, "jax", "--save_checkpoints_steps=2")
    assert f"model.ckpt-{killed_at}" in proc.stderr
    _assert_close(
        _step(resumed, STEPS), _step(runs / "jax", STEPS), TRAINED_REL, "killed"
    )


def _two_processes(output_dir, *extra):
    """run_pretraining.py --backend=jax as two processes of one CPU device
    each, joined as several hosts are (KERAS_DISTRIBUTION_*); `output_dir`:
    one, or a list of each process's."""
    (port,) = script_runner.free_ports(1)
    if not isinstance(output_dir, list):
        output_dir = [output_dir, output_dir]
    procs = []
    for index in range(2):
        procs.append(
            _run(
                output_dir[index],
                "jax",
                *extra,
                wait=False,
                env={
                    "KERAS_DISTRIBUTION_JOB_ADDRESSES": f"127.0.0.1:{port}",
                    "KERAS_DISTRIBUTION_NUM_PROCESSES": "2",
                    "KERAS_DISTRIBUTION_PROCESS_ID": str(index),
                },
            )
        )
    return procs


def _finish(procs, timeout=120):
    """(returncode, stderr) of each process; kills them all on a hang."""
    out = []
    try:
        for proc in procs:
            _, err = proc.communicate(timeout=timeout)
            out.append((proc.returncode, err))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    return out


def test_two_processes_train_as_one_and_stop_together(runs, tmp_path):
    """Two JAX processes (what two hosts run) split each batch of 8 over
    their devices. SIGTERM to process 1 alone: both stop after the same
    step, process 0 having written its checkpoint, and exit 143. Run again,
    they end where the one-process run ends (float32 accumulation apart: a
    batch counted twice, or a process training alone on its half, moves
    every weight by far more)."""
    out = tmp_path / "two"
    procs = _two_processes(out, "--save_checkpoints_steps=2")
    deadline = time.time() + 300
    while procs[1].poll() is None and time.time() < deadline:
        if os.path.isdir(out) and (_steps_written(out) or [0])[-1] >= 12:
            break
        time.sleep(0.005)
    procs[1].send_signal(signal.SIGTERM)
    (code0, err0), (code1, err1) = _finish(procs)
    assert (code0, code1) == (143, 143), (err0[-2000:], err1[-2000:])
    assert "2 cpu device(s) of 2 process(es); this is process 0" in err0
    stopped = _steps_written(out)[-1]
    assert 12 <= stopped < STEPS, "finished before the SIGTERM"
    for err in (err0, err1):
        assert f"saved a checkpoint at global_step {stopped}" in err
    # Only process 0 writes: its summaries are the only ones.
    assert len([f for f in os.listdir(out) if "tfevents" in f]) == 1
    results = _finish(_two_processes(out, "--save_checkpoints_steps=2"))
    for code, err in results:
        assert code == 0, err[-3000:]
    assert f"model.ckpt-{stopped}" in results[0][1]
    _assert_close(
        _step(out, STEPS),
        _step(runs / "jax", STEPS),
        TRAINED_REL,
        "2 processes",
    )


# Slow (~50 s on a slow 2-vCPU VM: two processes start and restore): a
# multi-host failure mode; test_two_processes_train_as_one_and_stop_together
# keeps two processes in the default run.
@pytest.mark.slow
def test_processes_resuming_different_steps_are_refused(runs, tmp_path):
    """Each process resumes from its --output_dir's newest checkpoint: an
    output_dir on each host (not shared storage) gave process 0 step 8 and
    process 1 a fresh start, silently trained on (or evaluated) as one
    model. Both fail, naming the steps; nothing is written."""
    resumed = _only_checkpoint(runs / "jax", 8, tmp_path / "p0")
    fresh = tmp_path / "p1"
    results = _finish(_two_processes([resumed, fresh]))
    for code, err in results:
        assert code != 0
        assert "restored different steps (0 to 8" in err, err[-3000:]
    assert _steps_written(resumed) == [8]
    # Evaluating: process 1 would use --init_checkpoint's weights.
    evaluation = _two_processes(
        [resumed, fresh], "--nodo_train", "--do_eval", "--max_eval_steps=2"
    )
    for code, err in _finish(evaluation):
        assert code != 0
        assert "restored different steps (0 to 8" in err, err[-3000:]
    assert not (resumed / "eval_results.txt").exists()


# Slow (~40 s on a slow 2-vCPU VM), as the test above.
@pytest.mark.slow
def test_a_lost_process_ends_the_others_at_once(runs, tmp_path):
    """Process 1 is killed (SIGKILL: a crashed host) mid-training. Process 0
    fails in its next step's exchange with it and exits at once with the
    error and the checkpoint to resume from, instead of waiting at exit for
    JAX's distributed client to give up on process 1 (about 90 s here, then
    an abort)."""
    out = tmp_path / "lost"
    procs = _two_processes(
        out, "--save_checkpoints_steps=2", "--num_train_steps=100000"
    )
    try:
        deadline = time.time() + 300
        while procs[0].poll() is None and time.time() < deadline:
            if os.path.isdir(out) and (_steps_written(out) or [0])[-1] >= 4:
                break
            time.sleep(0.005)
        procs[1].kill()
        killed = time.time()
        _, err = procs[0].communicate(timeout=60)
        waited = time.time() - killed
    finally:
        _finish(procs, timeout=5)
    assert procs[0].returncode == 1, err[-3000:]
    assert waited < 30, waited
    assert "LostProcessError: Process 0 of 2: a training step failed" in err
    newest = _steps_written(out)[-1]
    assert f"checkpoint in {out} (model.ckpt-{newest})." in err


class _OtherProcess:
    """A TrainStep stand-in for one of two processes: each step returns
    the larger of this process's vote and the other's (`votes`, by step),
    as the step's all-reduced vote does."""

    processes = 2

    def __init__(self, votes, error_at=None, error=""):
        self.votes, self.mine = votes, []
        # A step whose run fails with a JaxRuntimeError saying `error`.
        self.error_at, self.error = error_at, error

    def initial_state(self):
        return 0

    def global_step(self, state):
        return state

    def __call__(self, state, batch, vote):
        import jax

        from modeling.training import jax_steps

        if len(self.mine) == self.error_at:
            raise jax.errors.JaxRuntimeError(self.error)
        other = self.votes.get(len(self.mine), jax_steps.GO_ON)
        self.mine.append(vote)
        logs = {"loss": np.float32(1.0), jax_steps.VOTE_KEY: max(vote, other)}
        return state + 1, logs


@pytest.mark.parametrize(
    "other_votes, steps, stop",
    [
        ({}, 10, False),  # nobody stops early: the whole chunk
        ({3: 1}, 5, False),  # the other's time is up at step 3
        ({2: 2}, 4, True),  # the other got SIGTERM before step 2
    ],
)
def test_processes_end_a_chunk_after_the_same_step(other_votes, steps, stop):
    """The vote's protocol (jax_steps.TrainerSteps.train_chunk): a vote
    carried by step i is read after step i + 1 is dispatched, so every
    process runs the same steps and stops after step i + 1; a STOP vote is
    what the Trainer's stop check answers, on this process too."""
    from modeling.training import jax_steps
    from modeling.training import steps as steps_lib

    loop = _loop(_OtherProcess(other_votes))
    signal_ = steps_lib.StopSignal()
    done, sums, bad = loop.train_chunk(
        iter([{"x": np.zeros(2)}] * 20), 10, signal_
    )
    assert (done, bad, sums["loss"]) == (steps, -1, float(steps))
    assert jax_steps.VOTE_KEY not in sums
    assert set(loop.step.mine) == {jax_steps.GO_ON}
    assert signal_.agreed is stop
    assert signal_.requested(None) is stop


def _loop(step):
    """jax_steps.TrainerSteps around a TrainStep stand-in."""
    import types

    from modeling.training import jax_steps

    loop = jax_steps.TrainerSteps.__new__(jax_steps.TrainerSteps)
    loop.step = step
    loop.state, loop.trained = None, False
    loop.optimizer = types.SimpleNamespace(
        global_step=types.SimpleNamespace(assign=lambda value: None)
    )
    return loop


# What process 0's step said when process 1 was killed (gloo).
GLOO_RESET = (
    "UNKNOWN: Gloo all-reduce failed: [pair.cc:538] Read error "
    "[127.0.0.1]:16779: Connection reset by peer"
)


@pytest.mark.parametrize(
    "error, processes, lost",
    [
        (GLOO_RESET, 2, True),
        ("UNAVAILABLE: Failed to send RPC to coordination service", 2, True),
        # This process's own failure: no other process to blame.
        (
            "RESOURCE_EXHAUSTED: Out of memory while trying to allocate",
            2,
            False,
        ),
        # One process: there are no others.
        (GLOO_RESET, 1, False),
    ],
)
def test_a_failed_exchange_with_the_others_is_a_lost_process(
    error, processes, lost
):
    import jax

    from modeling import errors
    from modeling.training import steps as steps_lib

    step = _OtherProcess({}, error_at=3, error=error)
    step.processes = processes
    loop = _loop(step)
    raised = errors.LostProcessError if lost else jax.errors.JaxRuntimeError
    with pytest.raises(raised) as info:
        loop.train_chunk(
            iter([{"x": np.zeros(2)}] * 20), 10, steps_lib.StopSignal()
        )
    if lost:
        assert str(info.value).startswith("Process 0 of 1: a training step")
        assert error.splitlines()[0] in str(info.value)
    assert loop.state is None  # Donated to the failed step: gone.


def test_backend_cannot_switch_once_keras_runs():
    """This process runs Keras on TensorFlow: --backend=jax is one line."""
    import keras

    from modeling import backend
    from modeling import errors

    assert keras.backend.backend() == "tensorflow"
    assert backend.select("tensorflow") == "tensorflow"
    with pytest.raises(errors.UserError, match="cannot switch"):
        backend.select("jax")
    with pytest.raises(errors.UserError, match="expected one of"):
        backend.select("torch")


def test_what_jax_cannot_run_is_one_line(monkeypatch):
    """jax not installed: how to install it (Keras's own error is a
    traceback); run_classifier_with_tfhub's TensorFlow SavedModel: refused
    before anything runs."""
    import importlib.util
    import types

    import keras

    from modeling import backend
    from modeling import errors
    from modeling.tasks import common

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "jax" else real(name, *a),
    )
    monkeypatch.delitem(__import__("sys").modules, "keras")
    with pytest.raises(errors.UserError, match="jax is not installed"):
        backend.select("jax")
    monkeypatch.undo()
    assert keras.backend.backend() == "tensorflow"
    monkeypatch.setattr(backend, "current", lambda: "jax")
    hub = types.SimpleNamespace(bert_hub_module_handle="/m/encoder")
    with pytest.raises(ValueError, match="--backend=tensorflow"):
        common.check_backend(hub)
    # The flag the user gave, not the one it stands for.
    from modeling.training import run_config

    with pytest.raises(ValueError, match="^--precision=int8 converts"):
        run_config.RunConfig("/tmp/unused", 0, precision="int8")


# run_classifier with the classifier head's hard-coded dropout (the
# original's keep_prob 0.9) set to 0: the backends draw different masks.
NO_HEAD_DROPOUT = (
    "import runpy, sys; from modeling import heads; "
    "heads.CLASSIFIER_DROPOUT = 0.0; "
    "sys.argv = ['run_classifier.py'] + sys.argv[1:]; "
    "runpy.run_path('run_classifier.py', run_name='__main__')"
)


def test_run_classifier_on_jax_equals_tensorflow(minilm_small_ckpt, tmp_path):
    """MiniLM on MRPC rows, 4 steps of batch 4, dropout off, the same
    initial head: the step-4 checkpoint (weights and slots), eval_results
    and test_results.tsv of both backends within float32 accumulation.
    The word-embedding gradient is only gathered here, so this also holds
    the JAX step's clip norm to the original's row count
    (modeling/row_gradients.py): without it the slots differ by 0.6%."""
    init = tmp_path / "init"
    arrays = checkpoints.read_checkpoint(
        str(minilm_small_ckpt / "bert_model.ckpt")
    )
    rng = np.random.default_rng(0)
    arrays["output_weights"] = rng.normal(0, 0.02, (2, 384)).astype(np.float32)
    arrays["output_bias"] = np.zeros(2, np.float32)
    checkpoints.write_checkpoint(str(init / "bert_model.ckpt"), arrays)
    config = json.loads((minilm_small_ckpt / "bert_config.json").read_text())
    config["hidden_dropout_prob"] = 0.0
    config["attention_probs_dropout_prob"] = 0.0
    (init / "bert_config.json").write_text(json.dumps(config))
    out = {}
    for backend in ("tensorflow", "jax"):
        out[backend] = tmp_path / backend
        args = [
            "-c",
            NO_HEAD_DROPOUT,
            "--task_name=MRPC",
            f"--data_dir={os.path.join(ROOT, 'tests', 'testdata', 'cls_mrpc')}",
            f"--vocab_file={minilm_small_ckpt / 'vocab.txt'}",
            f"--bert_config_file={init / 'bert_config.json'}",
            f"--init_checkpoint={init / 'bert_model.ckpt'}",
            f"--output_dir={out[backend]}",
            "--do_train",
            "--do_eval",
            "--do_predict",
            "--max_seq_length=64",
            "--train_batch_size=4",
            "--num_train_epochs=1",
            "--learning_rate=1e-4",
            "--save_checkpoints_steps=2",
            "--random_seed=1",
            f"--backend={backend}",
        ]
        # KERAS_BACKEND before the wrapper imports Keras.
        env = dict(PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="2")
        env["KERAS_BACKEND"] = backend
        proc = script_runner.python(args, env=env, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
    _assert_close(
        _step(out["jax"], 4),
        _step(out["tensorflow"], 4),
        tolerance.FLOAT32_REL,
        "run_classifier",
        learning_rate=1e-4,
    )
    results = {
        b: dict(
            line.split(" = ")
            for line in (out[b] / "eval_results.txt").read_text().splitlines()
        )
        for b in out
    }
    assert (
        results["jax"]["eval_accuracy"]
        == results["tensorflow"]["eval_accuracy"]
    )
    assert results["jax"]["global_step"] == "4"
    tolerance.assert_float32_close(
        float(results["jax"]["eval_loss"]),
        float(results["tensorflow"]["eval_loss"]),
    )
    probabilities = {
        b: np.loadtxt(out[b] / "test_results.tsv", delimiter="\t") for b in out
    }
    tolerance.assert_float32_close(
        probabilities["jax"], probabilities["tensorflow"]
    )
