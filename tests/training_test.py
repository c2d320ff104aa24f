"""The training loop: resume, damaged checkpoints, SIGTERM, NaN, accumulation.

All runs use the golden tiny config with dropout off on random records, so two
runs with the same seed give the same weights.
"""

import os
import shutil
import signal
import threading
import time

import numpy as np
import pytest
import tensorflow as tf
import tolerance
import training_helpers as helpers

from modeling import checkpoints
from modeling import config as config_lib
from modeling import errors
from modeling import signals
from modeling.data import input_pipeline
from modeling.tasks import pretraining
from modeling.training import checkpoint_manager
from modeling.training import predictor
from modeling.training import steps
from modeling.training import trainer as trainer_lib

BATCH = 8


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("train_data")
    config = helpers.tiny_config(root / "bert_config.json")
    records = helpers.write_records(root / "data.tfrecord")
    return config_lib.BertConfig.from_json_file(config), records


def _dataset_fn(records, batch=BATCH):
    return lambda start: input_pipeline.pretraining_dataset(
        [records],
        batch,
        helpers.SEQ,
        helpers.PRED,
        True,
        seed=3,
        start_batch=start,
    )


def _trainer(bert_config, output_dir, **overrides):
    tf.keras.utils.set_random_seed(7)
    settings = {
        "output_dir": str(output_dir),
        "num_train_steps": 10,
        "learning_rate": 1e-3,
        "num_warmup_steps": 2,
        "save_checkpoints_steps": 2,
        "iterations_per_loop": 3,
    }
    settings.update(overrides)
    task = pretraining.make_task(bert_config)
    return trainer_lib.Trainer(task, trainer_lib.RunConfig(**settings))


def _assert_same_checkpoint(a, b, atol=0.0):
    left, right = checkpoints.read_checkpoint(a), checkpoints.read_checkpoint(b)
    assert sorted(left) == sorted(right)
    for name in left:
        np.testing.assert_allclose(
            left[name], right[name], atol=atol, err_msg=name
        )


@pytest.fixture(scope="module")
def full_run(data, tmp_path_factory):
    """An uninterrupted 10-step run (checkpoints every 2 steps, keep 5)."""
    bert_config, records = data
    out = tmp_path_factory.mktemp("full")
    assert _trainer(bert_config, out).train(_dataset_fn(records)) == 10
    return out


def test_checkpoints_are_original_format_and_rotated(full_run):
    state = tf.train.get_checkpoint_state(str(full_run))
    names = [os.path.basename(p) for p in state.all_model_checkpoint_paths]
    assert names == [f"model.ckpt-{s}" for s in (2, 4, 6, 8, 10)]
    arrays = checkpoints.read_checkpoint(str(full_run / "model.ckpt-10"))
    assert (
        arrays["global_step"] == 10 and arrays["global_step"].dtype == np.int64
    )
    assert "bert/embeddings/word_embeddings/adam_m" in arrays
    assert "cls/predictions/output_bias/adam_v" in arrays
    assert not any("seed_generator" in n for n in arrays)


def test_resume_gives_the_same_final_checkpoint(data, full_run, tmp_path):
    bert_config, records = data
    # A run that stopped after step 4: resume it with the same command.
    for suffix in (".index", ".data-00000-of-00001"):
        shutil.copy(full_run / f"model.ckpt-4{suffix}", tmp_path)
    trainer = _trainer(bert_config, tmp_path)
    assert trainer.train(_dataset_fn(records)) == 10
    _assert_same_checkpoint(
        full_run / "model.ckpt-10", tmp_path / "model.ckpt-10"
    )


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        # Slow (~30 s on a slow 2-vCPU VM); accumulation and checkpointing
        # each have default tests against the plain step.
        pytest.param(
            {"gradient_accumulation_steps": 2, "gradient_checkpointing": True},
            marks=pytest.mark.slow,
        ),
    ],
)
def test_resume_with_dropout_draws_the_uninterrupted_runs_masks(
    tmp_path, overrides
):
    """Dropout's random state is not in the checkpoint (nor was it in the
    original's): a resumed run sets it from the step, so a run resumed at
    step 4 ends with the uninterrupted run's weights, dropout on (it drew
    other masks: other weights)."""
    config = helpers.tiny_config(tmp_path / "bert_config.json", dropout=0.1)
    bert_config = config_lib.BertConfig.from_json_file(config)
    records = helpers.write_records(tmp_path / "data.tfrecord")
    full, resumed = tmp_path / "full", tmp_path / "resumed"
    _trainer(bert_config, full, num_train_steps=6, **overrides).train(
        _dataset_fn(records)
    )
    resumed.mkdir()
    for suffix in (".index", ".data-00000-of-00001"):
        shutil.copy(full / f"model.ckpt-4{suffix}", resumed)
    _trainer(bert_config, resumed, num_train_steps=6, **overrides).train(
        _dataset_fn(records)
    )
    _assert_same_checkpoint(full / "model.ckpt-6", resumed / "model.ckpt-6")
    # Dropout acted in those steps: without it, they end elsewhere.
    plain = tmp_path / "plain"
    plain.mkdir()
    for suffix in (".index", ".data-00000-of-00001"):
        shutil.copy(full / f"model.ckpt-4{suffix}", plain)
    no_dropout = config_lib.BertConfig.from_json_file(
        helpers.tiny_config(tmp_path / "plain.json")
    )
    _trainer(no_dropout, plain, num_train_steps=6, **overrides).train(
        _dataset_fn(records)
    )
    with_dropout = checkpoints.read_checkpoint(str(full / "model.ckpt-6"))
    without = checkpoints.read_checkpoint(str(plain / "model.ckpt-6"))
    assert (
        max(np.abs(with_dropout[k] - without[k]).max() for k in with_dropout)
        > 1e-4
    )


def test_damaged_newest_checkpoint_falls_back(data, full_run, tmp_path, caplog):
    bert_config, _ = data
    for step in (8, 10):
        for suffix in (".index", ".data-00000-of-00001"):
            shutil.copy(full_run / f"model.ckpt-{step}{suffix}", tmp_path)
    data_file = tmp_path / "model.ckpt-10.data-00000-of-00001"
    data_file.write_bytes(data_file.read_bytes()[:100])  # truncated
    trainer = _trainer(bert_config, tmp_path)
    trainer.build(_dataset_fn(data[1])(0).element_spec)
    assert trainer.manager.restore_latest().endswith("model.ckpt-8")
    assert trainer.global_step == 8
    assert "model.ckpt-10 is damaged" in caplog.text
    # A damaged state file is no traceback: the checkpoints on disk count.
    for text in (b"", b"all_model_checkpoint_paths: 'x'", b"\xff\xfe"):
        (tmp_path / "checkpoint").write_bytes(text)
        assert trainer.manager.restore_latest().endswith("model.ckpt-8")
    (tmp_path / "model.ckpt-8.index").write_bytes(b"garbage")
    with pytest.raises(
        errors.UserError, match="All 2 checkpoints .* are damaged"
    ):
        trainer.manager.restore_latest()


def test_sigterm_saves_a_checkpoint_mid_loop(data, tmp_path):
    bert_config, records = data
    big = 10**6
    trainer = _trainer(
        bert_config,
        tmp_path,
        num_train_steps=big,
        save_checkpoints_steps=big,
        iterations_per_loop=big,
    )
    done = threading.Event()

    def kill_when_training():
        # Reads the step while the in-graph loop runs; signals mid-loop.
        while not done.is_set():
            step = trainer.optimizer.global_step
            if step is not None and int(step.numpy()) >= 3:
                os.kill(os.getpid(), signal.SIGTERM)
                return
            time.sleep(0.01)

    killer = threading.Thread(target=kill_when_training, daemon=True)
    killer.start()
    try:
        with pytest.raises(trainer_lib.TrainingInterrupted, match="SIGTERM"):
            trainer.train(_dataset_fn(records))
    finally:
        done.set()
        killer.join()
    # The in-graph loop stopped long before its million steps.
    step = trainer.global_step
    assert 0 < step < big
    assert tf.train.latest_checkpoint(str(tmp_path)).endswith(
        f"model.ckpt-{step}"
    )
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_sigterm_while_a_batch_is_slow_saves_the_step_it_names(
    data, full_run, tmp_path, monkeypatch
):
    """SIGTERM while the loop waits for a slow (not stuck) batch: the
    watcher sees the wait and saves step 4 from its thread, and the batch
    arrives during that save. That batch makes no update (it made one: the
    checkpoint named step 4 held weights a step ahead), so the checkpoint
    is the uninterrupted run's step 4; a resume reads the batch again."""
    bert_config, records = data
    trainer = _trainer(
        bert_config,
        tmp_path,
        save_checkpoints_steps=100,
        iterations_per_loop=100,
        save_checkpoints_secs=0,
    )
    trainer.stop_signal.stuck_after_secs = 0.4
    delivered = threading.Event()

    def slow(index, ids):
        if int(index) == 4:  # The fifth batch: SIGTERM, then 3 s.
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(3.0)
            delivered.set()
        return ids

    def dataset_fn(start):
        def delay(index, features):
            ids = features["input_ids"]
            slowed = tf.py_function(slow, [index + start, ids], ids.dtype)
            slowed.set_shape(ids.shape)
            return {**features, "input_ids": slowed}

        return _dataset_fn(records)(start).enumerate().map(delay)

    steps_seen = []
    save = checkpoint_manager.CheckpointManager.save

    def watcher_save(manager, *args, **kwargs):
        if not steps_seen:  # The watcher's save; the batch comes meanwhile.
            before = trainer.global_step
            assert delivered.wait(30)
            time.sleep(1.0)  # Time for a step, if one ran.
            steps_seen.append((before, trainer.global_step))
        return save(manager, *args, **kwargs)

    monkeypatch.setattr(
        checkpoint_manager.CheckpointManager, "save", watcher_save
    )
    exits = []
    monkeypatch.setattr(signals, "exit_now", exits.append)
    with pytest.raises(trainer_lib.TrainingInterrupted, match="step 4"):
        trainer.train(dataset_fn)
    assert exits == [errors.EXIT_INTERRUPTED]
    assert steps_seen == [(4, 4)]
    _assert_same_checkpoint(
        full_run / "model.ckpt-4", tmp_path / "model.ckpt-4"
    )


def test_a_host_loops_batch_waits_for_the_stuck_input_save():
    """JAX's host loop: a batch that arrives while the watcher saves (it
    decided the input was stuck) waits until that save's exit, so no step
    changes the state the save reads."""
    stop = steps.StopSignal(stuck_after_secs=0.2)
    saving, release, received = (threading.Event() for _ in range(3))

    def on_stuck():
        saving.set()
        release.wait(30)

    stop.on_stuck = on_stuck
    stop.step_fn = lambda: 0
    stop.set_waiting(True)
    stop._request()  # What SIGTERM does; starts the stuck-input watcher.
    assert saving.wait(30)
    arrival = threading.Thread(
        target=lambda: (stop.set_waiting(False), received.set())
    )
    arrival.start()
    assert not received.wait(0.5)
    release.set()
    assert received.wait(30)
    arrival.join()


def test_sigterm_during_an_evaluation_at_a_checkpoint_stops_it(data, tmp_path):
    """--eval_during_training evaluates at each scheduled checkpoint: a
    SIGTERM then stops that evaluation at its next batch (it ran to its
    end, however long), and a SIGTERM checkpoint runs no evaluation."""
    bert_config, records = data
    trainer = _trainer(bert_config, tmp_path, num_train_steps=4)
    eval_data = input_pipeline.pretraining_dataset(
        [records], BATCH, helpers.SEQ, helpers.PRED, False
    )
    evaluated = []

    def evaluate_with_sigterm(step, prefix):
        os.kill(os.getpid(), signal.SIGTERM)
        evaluated.append(step)
        trainer.evaluate(eval_data, max_eval_steps=10**6)

    trainer.save_callbacks.append(evaluate_with_sigterm)
    start = time.time()
    with pytest.raises(trainer_lib.TrainingInterrupted, match="evaluation"):
        trainer.train(_dataset_fn(records))
    assert evaluated == [2]
    assert time.time() - start < 60
    assert tf.train.latest_checkpoint(str(tmp_path)).endswith("model.ckpt-2")


def test_sigterm_stops_a_prediction_at_a_checkpoint(data, tmp_path):
    """The fine-tuning scripts' --eval_during_training predicts with a
    Predictor (not Trainer.evaluate): a SIGTERM then stops that prediction
    at its next batch (it ran all 100), and the run stops."""
    bert_config, records = data
    trainer = _trainer(bert_config, tmp_path, num_train_steps=4)
    ran = []

    class Backend:
        def run(self, batches, static_shapes=False):
            for batch in batches:
                ran.append(len(batch["input_mask"]))
                yield batch, {"logits": batch["input_mask"][:, :1] * 1.0}

    rows = {
        "input_ids": np.ones((1000, 8), np.int32),
        "input_mask": np.ones((1000, 8), np.int32),
        "segment_ids": np.zeros((1000, 8), np.int32),
    }

    def evaluate(step, prefix):
        os.kill(os.getpid(), signal.SIGTERM)
        deadline = time.time() + 10
        while not trainer.stop_signal.is_requested():
            assert time.time() < deadline
            time.sleep(0.01)
        predictor.Predictor(Backend(), batch_size=10).gather(rows)

    trainer.save_callbacks.append(evaluate)
    with pytest.raises(trainer_lib.TrainingInterrupted, match="evaluation"):
        trainer.train(_dataset_fn(records))
    assert ran == [10]
    assert tf.train.latest_checkpoint(str(tmp_path)).endswith("model.ckpt-2")
    # Outside a training run's callbacks nothing checks.
    assert len(predictor.Predictor(Backend(), 10).gather(rows)[1]["logits"])
    # The resumed run offers step 2 again: a SIGTERM there stops it too
    # (it was lost, and training ran on to its end).
    ran.clear()
    trainer = _trainer(bert_config, tmp_path, num_train_steps=4)
    trainer.save_callbacks.append(evaluate)
    with pytest.raises(trainer_lib.TrainingInterrupted, match="evaluation"):
        trainer.train(_dataset_fn(records))
    assert ran == [10] and trainer.global_step == 2


def test_a_resumed_run_offers_its_restored_step_to_the_callbacks(
    data, tmp_path
):
    """A checkpoint saved on SIGTERM runs no callback (its evaluation would
    delay the exit): the resumed run offers it (here the last step, where
    nothing else would evaluate it); the keeper passes over steps it has."""
    bert_config, records = data
    _trainer(bert_config, tmp_path, num_train_steps=4).train(
        _dataset_fn(records)
    )
    resumed = _trainer(bert_config, tmp_path, num_train_steps=4)
    seen = []
    resumed.save_callbacks.append(
        lambda step, prefix: seen.append((step, prefix))
    )
    assert resumed.train(_dataset_fn(records)) == 4
    assert seen == [(4, str(tmp_path / "model.ckpt-4"))]


def test_sigterm_right_after_a_save_writes_it_once(data, tmp_path, monkeypatch):
    """SIGTERM just after the scheduled checkpoint of step 2: the next
    compiled call runs no step, and that step's checkpoint is not written a
    second time."""
    bert_config, records = data
    trainer = _trainer(bert_config, tmp_path, num_train_steps=6)
    saves = []
    save = checkpoint_manager.CheckpointManager.save

    def counting_save(manager, *args, **kwargs):
        saves.append(trainer.global_step)
        return save(manager, *args, **kwargs)

    monkeypatch.setattr(
        checkpoint_manager.CheckpointManager, "save", counting_save
    )
    trainer.save_callbacks.append(
        lambda step, prefix: os.kill(os.getpid(), signal.SIGTERM)
    )
    start = time.time()
    with pytest.raises(trainer_lib.TrainingInterrupted, match="step 2"):
        trainer.train(_dataset_fn(records))
    assert saves == [2]
    assert time.time() - start < 120
    assert tf.train.latest_checkpoint(str(tmp_path)).endswith("model.ckpt-2")


def test_sigterm_after_the_last_step_still_stops(data, tmp_path, monkeypatch):
    """SIGTERM after the loop's last check (on JAX with several processes,
    after their last vote): training is complete and saved, and train()
    raises TrainingInterrupted, so the script stops before its evaluation
    or prediction instead of running on."""
    bert_config, records = data
    trainer = _trainer(bert_config, tmp_path, num_train_steps=2)
    loop = trainer._train_loop

    def late_sigterm(*args):
        step = loop(*args)
        os.kill(os.getpid(), signal.SIGTERM)
        deadline = time.time() + 10
        while not trainer.stop_signal.is_requested():
            assert time.time() < deadline
            time.sleep(0.01)
        return step

    monkeypatch.setattr(trainer, "_train_loop", late_sigterm)
    with pytest.raises(
        trainer_lib.TrainingInterrupted, match="after the last training step"
    ):
        trainer.train(_dataset_fn(records))
    assert tf.train.latest_checkpoint(str(tmp_path)).endswith("model.ckpt-2")
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_nan_loss_stops_with_the_step_and_keeps_good_checkpoints(
    data, tmp_path
):
    bert_config, records = data
    trainer = _trainer(bert_config, tmp_path)
    clean_loss = trainer.task.loss_fn

    def poisoned(features, outputs):
        logs = dict(clean_loss(features, outputs))
        if trainer.optimizer.global_step is None:
            return logs  # the eager call in build(), before the optimizer
        bad = trainer.optimizer.global_step >= 5
        logs["loss"] = tf.where(bad, np.nan, 1.0) * logs["loss"]
        return logs

    trainer.task.loss_fn = poisoned
    with pytest.raises(
        trainer_lib.NonFiniteLossError, match="at global_step 5"
    ):
        trainer.train(_dataset_fn(records))
    assert trainer.global_step == 6  # no update ran after the bad one
    assert tf.train.latest_checkpoint(str(tmp_path)).endswith("model.ckpt-4")
    arrays = checkpoints.read_checkpoint(str(tmp_path / "model.ckpt-4"))
    assert all(np.all(np.isfinite(a)) for a in arrays.values())


def _accumulation_runs(bert_config, records, tmp_path):
    """3 steps of batch 8 in one piece and in 2 micro-batches, the loss
    scaled below the clip norm (helpers.below_clip_norm); the checkpoints'
    arrays."""
    runs = {}
    for n in (1, 2):
        trainer = _trainer(
            bert_config,
            tmp_path / str(n),
            num_train_steps=3,
            gradient_accumulation_steps=n,
        )
        trainer.task.loss_fn = helpers.below_clip_norm(trainer.task.loss_fn)
        trainer.train(_dataset_fn(records))
        runs[n] = checkpoints.read_checkpoint(
            str(tmp_path / str(n) / "model.ckpt-3")
        )
    return runs


def _assert_accumulated_close(runs):
    # The same gradient, summed from batches of 4 instead of 8: other
    # float32 sums. Slots on their own scale: the micro-batches' gradients
    # summed instead of averaged double adam_m (Adam's update itself does
    # not change with the gradients' scale).
    tolerance.assert_checkpoints_close(
        runs[2], runs[1], tolerance.FLOAT32_REL, "accumulated", 1e-3
    )


def test_gradient_accumulation_matches_the_full_batch(data, tmp_path):
    """Equal micro-batches with equal mask counts: one batch's update."""
    bert_config, records = data
    _assert_accumulated_close(
        _accumulation_runs(bert_config, records, tmp_path)
    )


def test_accumulation_equals_one_batch_with_varied_mask_counts(data, tmp_path):
    """Micro-batches of different masked-token counts: each one's masked-LM
    loss divides by the whole batch's count (losses.MLM_DENOMINATOR), so the
    update is one batch's. With each part's own count (the mean of the
    parts' ratios) the weights differed by 3e-3 after 3 steps here."""
    bert_config, _ = data
    records = helpers.write_records(
        tmp_path / "varied.tfrecord", seed=1, varied_masks=True
    )
    _assert_accumulated_close(
        _accumulation_runs(bert_config, records, tmp_path)
    )


def test_evaluate_returns_the_original_keys(data, full_run):
    bert_config, records = data
    trainer = _trainer(bert_config, full_run)
    dataset = input_pipeline.pretraining_dataset(
        [records], BATCH, helpers.SEQ, helpers.PRED, False
    )
    results = trainer.evaluate(dataset, max_eval_steps=3)
    assert sorted(results) == [
        "global_step",
        "loss",
        "masked_lm_accuracy",
        "masked_lm_loss",
        "next_sentence_accuracy",
        "next_sentence_loss",
    ]
    assert results["global_step"] == 10
    assert 0.0 <= results["masked_lm_accuracy"] <= 1.0
    assert results["loss"] == pytest.approx(
        results["masked_lm_loss"] + results["next_sentence_loss"], rel=1e-3
    )


def test_training_and_evaluation_read_without_tf_data_autotuning(
    data, tmp_path, monkeypatch
):
    # The autotuner's sleep could hold up the iterator's end (a SIGTERMed
    # run's exit, an evaluation's end) by up to a minute
    # (input_pipeline.without_autotuning).
    bert_config, records = data
    trainer = _trainer(bert_config, tmp_path, num_train_steps=2)
    seen = []
    batches = steps.StepFunctions.batches

    def spy(self, dataset):
        seen.append(dataset.options().autotune.enabled)
        return batches(self, dataset)

    monkeypatch.setattr(steps.StepFunctions, "batches", spy)
    assert trainer.train(_dataset_fn(records)) == 2
    dataset = input_pipeline.pretraining_dataset(
        [records], BATCH, helpers.SEQ, helpers.PRED, False
    )
    trainer.evaluate(dataset, max_eval_steps=1)
    assert seen == [False, False]


def test_save_callbacks_see_every_checkpoint(data, tmp_path):
    bert_config, records = data
    trainer = _trainer(bert_config, tmp_path, num_train_steps=4)
    seen = []
    trainer.save_callbacks.append(
        lambda step, prefix: seen.append((step, prefix))
    )
    trainer.train(_dataset_fn(records))
    assert seen == [(s, str(tmp_path / f"model.ckpt-{s}")) for s in (2, 4)]


def test_float16_loss_scaling_skips_overflowing_steps(data, tmp_path):
    bert_config, records = data
    keras = tf.keras
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        trainer = _trainer(
            bert_config,
            tmp_path,
            num_train_steps=2,
            precision="mixed_float16",
            num_warmup_steps=0,
        )
        dataset_fn = _dataset_fn(records)
        trainer.build(dataset_fn(0).element_spec)
        before = {k: v.numpy() for k, v in trainer.manager.variables().items()}
        # A scale that overflows float16 gradients: the step is skipped.
        trainer._steps.loss_scale.assign(1e30)
        trainer.train(dataset_fn)
        # The scale is saved (under tf.keras's names) and resumed: a resumed
        # run scales as the uninterrupted one would.
        resumed = _trainer(
            bert_config,
            tmp_path,
            num_train_steps=2,
            precision="mixed_float16",
            num_warmup_steps=0,
        )
        resumed.build(dataset_fn(0).element_spec)
        resumed.manager.restore_latest()
    finally:
        keras.mixed_precision.set_global_policy("float32")
    assert trainer.global_step == 2  # skipped steps still consume batches
    # Both steps overflowed float16: the scale halved twice, nothing moved.
    assert float(trainer._steps.loss_scale.numpy()) == pytest.approx(2.5e29)
    after = checkpoints.read_checkpoint(str(tmp_path / "model.ckpt-2"))
    assert after["current_loss_scale"] == pytest.approx(2.5e29)
    assert after["good_steps"] == 0
    assert float(resumed._steps.loss_scale.numpy()) == pytest.approx(2.5e29)
    for name, value in before.items():
        if name not in ("current_loss_scale", "good_steps"):
            np.testing.assert_array_equal(after[name], value, err_msg=name)


def test_a_nan_gradient_under_a_finite_loss_is_never_applied_or_saved(
    data, tmp_path, monkeypatch
):
    """The loss was checked, not the gradient: a NaN gradient made every
    weight NaN through the clip, and the checkpoint after it was saved (the
    error then named it the last good one). Now its step reports a NaN
    loss: the run stops there, nothing saved."""
    bert_config, records = data
    trainer = _trainer(bert_config, tmp_path, num_train_steps=4)
    dataset_fn = _dataset_fn(records)
    trainer.build(dataset_fn(0).element_spec)
    real = trainer._steps._grad_fn

    def poisoned(features):
        logs, grads = real(features)
        step = trainer.optimizer.global_step
        poison = tf.where(step == 1, float("nan"), 1.0)
        return logs, [None if g is None else g * poison for g in grads]

    trainer._steps._grad_fn = poisoned
    with pytest.raises(
        trainer_lib.NonFiniteLossError, match="at global_step 1"
    ):
        trainer.train(dataset_fn)
    assert not [n for n in os.listdir(tmp_path) if n.startswith("model.ckpt")]


def test_xla_matches_the_plain_step(data, tmp_path):
    """4 steps (the first at learning rate 0: warmup), calls of 3 and 1:
    XLA's kernels sum in another order, so float32 rounding apart. Each
    weight within FLOAT32_REL of its magnitude (or of the learning rate),
    each Adam slot of the largest of its kind (the gradients' scale, the
    loss below the clip norm: a gradient XLA scaled or summed wrongly shows
    there, not in Adam's scale-free update)."""
    bert_config, records = data
    runs = {}
    for name, use_xla in [("plain", False), ("xla", True)]:
        trainer = _trainer(
            bert_config, tmp_path / name, num_train_steps=4, use_xla=use_xla
        )
        trainer.task.loss_fn = helpers.below_clip_norm(trainer.task.loss_fn)
        assert trainer.train(_dataset_fn(records)) == 4
        runs[name] = checkpoints.read_checkpoint(
            str(tmp_path / name / "model.ckpt-4")
        )
    tolerance.assert_checkpoints_close(
        runs["xla"], runs["plain"], tolerance.FLOAT32_REL, "XLA", 1e-3
    )


def test_evaluate_without_any_checkpoint_is_a_clear_error(data, tmp_path):
    bert_config, records = data
    trainer = _trainer(bert_config, tmp_path)
    dataset = input_pipeline.pretraining_dataset(
        [records], BATCH, helpers.SEQ, helpers.PRED, False
    )
    with pytest.raises(ValueError, match="nothing to evaluate"):
        trainer.evaluate(dataset, max_eval_steps=1)


def test_batch_not_divisible_by_accumulation_is_a_clear_error(data, tmp_path):
    bert_config, records = data
    trainer = _trainer(bert_config, tmp_path, gradient_accumulation_steps=3)
    with pytest.raises(ValueError, match="divisible .* gradient_accumulation"):
        trainer.train(_dataset_fn(records))
