"""The model core, the original optimizer and the training step on Keras 3's
JAX backend, in processes where TensorFlow cannot be imported
(tests/jax_worker.py): the golden outputs and the original's 3 optimizer
steps, data parallel over 2 host devices, gradient accumulation, gradient
checkpointing with dropout, mixed_bfloat16."""

import json
import os

import jax_worker
import numpy as np
import pytest
import script_runner
import tolerance
from constants import REPO_ROOT
from models_test import OUTPUTS

from modeling import checkpoints

pytest.importorskip("jax", reason="jax is not installed (the test extra)")

WORKER = str(REPO_ROOT / "tests" / "jax_worker.py")


@pytest.fixture(scope="module")
def jax_results(tmp_path_factory, optional_shared_dir):
    """Every job of the worker, run once in one process with TensorFlow
    blocked and 2 host devices: {job: {name: array}} (the golden jobs only
    where ../shared is)."""
    out = tmp_path_factory.mktemp("jax")
    golden = optional_shared_dir and optional_shared_dir / "golden"
    golden = str(golden) if golden and golden.is_dir() else ""
    proc = script_runner.run_without_tensorflow(
        [WORKER, str(out), golden, *jax_worker.JOBS],
        blocked=("tensorflow", "tensorflow_text"),
        env={
            "KERAS_BACKEND": "jax",
            "PYTHONPATH": str(REPO_ROOT),
            # The run's own XLA flags (conftest.py), and 2 host devices.
            "XLA_FLAGS": os.environ.get("XLA_FLAGS", "")
            + " --xla_force_host_platform_device_count=2",
        },
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "tensorflow imported: False" in proc.stdout
    results = {}
    for job in jax_worker.JOBS:
        if (out / f"{job}.npz").exists():
            with np.load(out / f"{job}.npz") as data:
                results[job] = {k: data[k] for k in data.files}
    return results


def test_golden_outputs_under_jax(golden_dir, jax_results):
    """The original release's outputs on tiny_init, held to 1e-5 of the
    magnitudes summed, as models_test holds TensorFlow's."""
    got = jax_results["golden_outputs"]
    with np.load(golden_dir / "tiny_outputs.npz") as data:
        golden = {k: data[k] for k in data.files}
    hidden = tolerance.magnitude(golden["sequence_output"])
    for name in OUTPUTS:
        assert got[name].shape == golden[name].shape, name
        scale = max(hidden, tolerance.magnitude(golden[name]))
        tolerance.assert_float32_close(
            got[name], golden[name], scale=scale, err_msg=name
        )
    tolerance.assert_float32_close(
        got["all_encoder_layers"], golden["all_encoder_layers"]
    )


def test_three_steps_under_jax_equal_the_originals(golden_dir, jax_results):
    """3 updates of the original optimizer through the JAX step: the losses,
    every weight, adam_m, adam_v and global_step of the original's
    checkpoint, to float32 rounding (as the TensorFlow optimizer's test).

    The pre-training decoder is tied to the word embeddings, so their
    gradient is dense in the original too (the gathered rows' clip count,
    modeling/row_gradients.py, is held by tests/jax_scripts_test.py's
    fine-tuning run). A wrong clip or a wrong formula moves the weights by
    about the learning rate (1e-2)."""
    got = dict(jax_results["three_steps"])
    steps = json.loads(
        (golden_dir / "tiny_after_3_steps" / "steps.json").read_text()
    )
    np.testing.assert_allclose(
        got.pop("_losses"), steps["losses_before_each_step"], rtol=0, atol=1e-5
    )
    golden = checkpoints.read_checkpoint(
        golden_dir / "tiny_after_3_steps" / "model.ckpt-3"
    )
    # As the TensorFlow optimizer's test (tests/optimization_test.py).
    tolerance.assert_checkpoints_close(
        got, golden, 1e-4, "the original's 3 steps under JAX", 1e-2
    )


# The worker's learning rate: the scale below which a weight's difference is
# rounding (a weight the gradient leaves at ~0, such as the key bias, which
# the softmax ignores, holds float noise of ~1e-17), while a wrong gradient
# moves weights by about the rate times the gradient.
LEARNING_RATE = 1e-2


def _assert_same_weights(got, a, b):
    """The weights (w<i>) and, where given, the optimizer's step counter
    (step) and slots (m<i>, v<i>) of runs `a` and `b` agree to float32
    summation order. Where the first weights (init<i>) are given, some
    weights moved by far more than that bound: the updates were not all zero
    (the first one's learning rate is). The slots hold the gradients'
    differences that an update too small beside its weight would hide."""
    names = [k[: -len(a)] for k in got if k.endswith(a) and k != "loss" + a]
    assert names
    # A slot is compared on its own scale (adam_v is a squared gradient, far
    # below the weights), floored at 1e-3 of its kind's largest: a gradient
    # that is 0 but for rounding (the attention's key bias) is the rounding
    # of sums of terms as large as the others.
    largest = {
        kind: max(
            (tolerance.magnitude(got[k]) for k in got if k[0] == kind),
            default=0.0,
        )
        for kind in "mv"
    }
    moved = []
    for name in names:
        scale = tolerance.magnitude(got[name + a])
        if name.startswith("w"):
            scale = max(scale, LEARNING_RATE)
        elif name[0] in largest:
            scale = max(scale, 1e-3 * largest[name[0]])
        tolerance.assert_float32_close(
            got[name + b], got[name + a], scale=scale, err_msg=name
        )
        init = got.get(f"init{name[1:]}{a}") if name.startswith("w") else None
        if init is not None:
            bound = tolerance.float32_atol(None, scale=scale)
            moved.append(tolerance.magnitude(got[name + a] - init) / bound)
    if moved:
        assert max(moved) > 100, moved


def test_data_parallel_over_two_devices_equals_one(jax_results):
    """The same global batch split over 2 host devices: the mean gradient
    is the one device's, up to float32 summation order."""
    got = jax_results["data_parallel"]
    _assert_same_weights(got, "_1", "_2")


def test_gradient_accumulation_equals_one_batch(jax_results):
    got = jax_results["accumulation"]
    _assert_same_weights(got, "_1", "_2")
    _assert_same_weights(got, "_1", "_2x2")
    # Over 2 devices, each computes its half of each micro-batch: about
    # half the one device's work (were the micro-batches blocks of the
    # whole batch, XLA would run each in full on both devices: 1.0x).
    assert got["flops_2x2"] < 0.8 * got["flops_2"], got


def test_a_nan_gradient_is_not_applied_under_jax(jax_results):
    """As on TensorFlow: a NaN gradient under a finite loss changes no
    weight (the clip would have made them all NaN) and reports a NaN loss,
    so the Trainer stops there with nothing saved after it."""
    out = jax_results["nan_gradient"]
    assert np.isnan(out["loss"])
    count = len([k for k in out if k.startswith("before")])
    assert count > 10
    for i in range(count):
        np.testing.assert_array_equal(out[f"after{i}"], out[f"before{i}"])


def test_accumulation_counts_the_embedding_rows_as_one_batch(jax_results):
    """A fine-tuning model's word-embedding gradient (a gather only) under
    2 micro-batches: the clip norm counts each micro-batch's rows, as
    TensorFlow's accumulation and one whole batch do, so the update is one
    batch's. Counting the summed dense gradient differed by 0.24% of the
    update; the float32 sums of other shapes, by 3e-5."""
    out = jax_results["accumulation_rows"]
    count = len([k for k in out if k.startswith("u1_")])
    worst = 0.0
    for i in range(count):
        one, two = out[f"u1_{i}"], out[f"u2_{i}"]
        scale = max(float(np.abs(one).max()), 1e-12)
        worst = max(worst, float(np.abs(one - two).max()) / scale)
    assert worst < 5e-4, worst


def test_each_evaluation_reuses_the_compiled_predict_step(jax_results):
    """Two predictors of one model (--eval_during_training builds one per
    evaluation): the second compiles nothing (it compiled every batch
    shape again)."""
    assert int(jax_results["predict_cache"]["compiles"]) == 1
    assert not bool(jax_results["predict_cache"]["model_alive"])


def test_variables_the_loss_does_not_reach_are_left_as_they_are(jax_results):
    """As TensorFlow's None gradient (and the original): a variable the
    loss does not use keeps its value and zero slots. A zero gradient went
    through the update, whose weight decay shrank the pooler each step."""
    out = jax_results["unused_variables"]
    names = [k.split(":", 1)[1] for k in out if k.startswith("before:")]
    unused = [n for n in names if n.startswith(("bert/pooler/", "cls/seq"))]
    assert any(n.endswith("kernel") for n in unused)
    assert any(n == "cls/seq_relationship/output_weights" for n in unused)
    for name in unused:
        np.testing.assert_array_equal(
            out[f"after:{name}"], out[f"before:{name}"], err_msg=name
        )
        assert not out[f"after:{name}/adam_v"].any(), name
    used = "bert/encoder/layer_0/output/dense/kernel"
    assert np.abs(out[f"after:{used}"] - out[f"before:{used}"]).max() > 1e-6


def test_gradient_checkpointing_drops_the_same_units(jax_results):
    """keras.remat (jax.checkpoint) with dropout on: the rerun in the
    backward pass draws the masks of the forward pass, so the step equals
    one without checkpointing."""
    got = jax_results["remat"]
    assert float(got["loss_remat"]) == pytest.approx(
        float(got["loss_plain"]), abs=1e-6
    )
    _assert_same_weights(got, "_plain", "_remat")


def test_mixed_bfloat16_under_jax(jax_results):
    """bf16 compute, float32 variables, a loss within bf16's precision of
    the float32 one."""
    got = jax_results["mixed_bfloat16"]
    assert str(got["mixed_bfloat16_dtype"]) == "float32"
    assert float(got["mixed_bfloat16"]) == pytest.approx(
        float(got["float32"]), rel=2e-2
    )
    assert float(got["mixed_bfloat16"]) != float(got["float32"])


def test_fused_attention_equals_the_explicit_path(jax_results):
    """ops.dot_product_attention, with a boolean mask for the original's
    -10000 bias, gives the explicit attention within float32 rounding. The
    all-masked row attends to every key in both; there the explicit path's
    scores were rounded at 10000 (ulp 2^-10), moving each probability by up
    to ~1e-3 relative, so it agrees to 4e-3 of the values (2.6e-4 seen). On
    a CPU the fused path is not used."""
    got = jax_results["fused_attention"]
    atol = tolerance.float32_atol(got["explicit"])
    np.testing.assert_allclose(got["fused"][:2], got["explicit"][:2], atol=atol)
    scale = tolerance.magnitude(got["explicit"])
    np.testing.assert_allclose(
        got["fused"][2], got["explicit"][2], atol=4e-3 * scale
    )
    assert not got["applies_on_cpu"]


def test_dropout_draws_sixteen_bits_a_unit(jax_results):
    """JAX's dropout masks (layers.half_word_dropout): each unit dropped
    with probability q = round(0.1 * 2^16) / 2^16 and the kept ones scaled
    by 1 / (1 - q), exactly; the two units of one random word independent
    (both dropped with probability q^2); each call a new mask. Bounds are 6
    binomial standard deviations over 393,216 units: a rate off by 0.003, or
    halves that repeat each other (q instead of q^2), fail."""
    got = jax_results["dropout_masks"]
    q = 6554 / 65536
    first, second = got["first"], got["second"]
    assert first.shape == (512, 768)
    kept = first[first != 0]
    np.testing.assert_array_equal(kept, np.float32(1 / (1 - q)))
    dropped = first == 0
    n = dropped.size
    assert abs(dropped.mean() - q) < 6 * np.sqrt(q * (1 - q) / n)
    # Columns 2i and 2i + 1 come from the two halves of one 32-bit word.
    both = (dropped[:, 0::2] & dropped[:, 1::2]).mean()
    assert abs(both - q * q) < 6 * np.sqrt(q * q / (n / 2))
    assert (dropped != (second == 0)).mean() > 0.1
    assert got["odd"].shape == (4, 7)
    assert set(np.unique(got["odd"])) <= {0.0, np.float32(1 / (1 - q))}
    np.testing.assert_array_equal(got["inference"], 1.0)
    # bfloat16 in, bfloat16 out: the kept units are the scale rounded.
    import ml_dtypes  # numpy's bfloat16 (JAX and TensorFlow depend on it)

    assert str(got["bfloat16_dtype"]) == "bfloat16"
    kept_bf16 = float(np.asarray(1 / (1 - q), dtype=ml_dtypes.bfloat16))
    assert set(np.unique(got["bfloat16"])) <= {0.0, kept_bf16}


def test_flash_attention_equals_the_explicit_numbers(jax_results):
    """modeling/flash_attention.py (run in Pallas's interpreter) against the
    same attention by XLA ops with the kernels' own dropout mask: outputs
    and the gradients of q, k and v within float32 rounding, with dropout
    and without, for a full, a padded and an all-padded example (which
    attends to every key, as the explicit path does); SelfAttention through
    it likewise. Its mask drops 0.1 of the units, and its kernels lower to
    Triton for a GPU: forward, dK/dV and dQ."""
    got = jax_results["flash_attention"]
    for rate in ("0.0", "0.1"):
        for suffix in ("", "_dq", "_dk", "_dv"):
            want = got[f"reference_{rate}{suffix}"]
            actual = got[f"kernel_{rate}{suffix}"]
            what = f"rate {rate}{suffix}"
            atol = tolerance.float32_atol(want)
            np.testing.assert_allclose(
                actual[:2], want[:2], atol=atol, err_msg=what
            )
            # The all-padded example: its scores are rounded at -10000 (ulp
            # 2^-10), as in the fused test above: 4e-3 of the values.
            scale = tolerance.magnitude(want)
            np.testing.assert_allclose(
                actual[2], want[2], atol=4e-3 * scale, err_msg=what
            )
    # Dropout changes the numbers: the tests above compare masked ones.
    assert np.abs(got["kernel_0.1"] - got["kernel_0.0"]).max() > 0.1
    kept = got["kept"]
    q = 6554 / 65536
    assert abs((1 - kept.mean()) - q) < 6 * np.sqrt(q * (1 - q) / kept.size)
    # Every (example, head) draws its own units.
    assert (kept[0, 0] != kept[0, 1]).mean() > 0.1
    assert (kept[0, 0] != kept[1, 0]).mean() > 0.1
    np.testing.assert_allclose(
        got["layer"],
        got["layer_reference"],
        atol=tolerance.float32_atol(got["layer_reference"]),
    )
    assert int(got["triton_kernels"]) == 3


def test_the_core_and_the_jax_step_import_no_tensorflow():
    code = (
        "import os\n"
        "os.environ['KERAS_BACKEND'] = 'jax'\n"
        "import modeling.config, modeling.layers, modeling.encoder\n"
        "import modeling.heads, modeling.models, modeling.losses\n"
        "import modeling.task_kinds, modeling.checkpoints\n"
        "import modeling.training.update_rules, modeling.training.jax_steps\n"
        "import modeling.training.optimization\n"
        "print('tensorflow' in sys.modules)\n"
    )
    proc = script_runner.run_without_tensorflow(
        [],
        code=code,
        blocked=("tensorflow", "tensorflow_text"),
        env={"PYTHONPATH": str(REPO_ROOT)},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().endswith("False")


def test_keras_fit_on_jax_equals_tensorflow(jax_results):
    """The one optimizer under Keras's own `fit` on both backends: the same
    4 updates (clip, weight decay except LayerNorm and biases, warmup then
    decay) give the same weights, slots and step within float32 rounding.
    An update rule that differed between backends (bias correction, a
    missing clip, a decayed bias) moves the weights by the learning rate
    (0.1)."""
    got = jax_results["keras_fit"]
    want = jax_worker.fit_run()
    assert sorted(got) == sorted(want)
    assert int(got["global_step"]) == int(want["global_step"]) == 4
    moved = 0.0
    for name in want:
        if name == "global_step":
            continue
        tolerance.assert_float32_close(got[name], want[name], err_msg=name)
        if not name.endswith(("adam_m", "adam_v")):
            moved = max(moved, float(np.abs(want[name]).max()))
    assert moved > 0
