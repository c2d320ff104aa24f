"""AdamWeightDecay and its schedule against the original release.

The golden test reproduces ../shared/golden/tiny_after_3_steps: 3 updates of
the original's optimizer from tiny_init on the tiny_outputs.npz batch.
"""

import json

import numpy as np
import pytest
import tensorflow as tf
import tolerance

from modeling.data import feature_names
from modeling.training import optimization


def test_schedule_matches_original_formula():
    sched = optimization.WarmupLinearDecay(1e-2, 10, 2)
    got = [float(sched(tf.constant(k, tf.int64))) for k in range(13)]
    want = [0.0, 0.005] + [1e-2 * (1 - k / 10) for k in range(2, 11)]
    want += [0.0, 0.0]  # clamped at num_train_steps
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-9)
    no_warmup = optimization.WarmupLinearDecay(1e-2, 10, 0)
    assert float(no_warmup(tf.constant(0, tf.int64))) == pytest.approx(1e-2)


def _numpy_adamw(params, grads_seq, lrs, decay_names):
    """The original's arithmetic in numpy float32 (reference)."""
    m = {k: np.zeros_like(v) for k, v in params.items()}
    v = {k: np.zeros_like(x) for k, x in params.items()}
    p = {k: x.copy() for k, x in params.items()}
    for grads, lr in zip(grads_seq, lrs):
        norm = np.sqrt(
            sum(np.sum(g.astype(np.float64) ** 2) for g in grads.values())
        )
        scale = 1.0 / max(norm, 1.0)
        for k in list(p):
            g = (grads[k] * scale).astype(np.float32)
            m[k] = np.float32(0.9) * m[k] + np.float32(0.1) * g
            v[k] = np.float32(0.999) * v[k] + np.float32(0.001) * g * g
            upd = m[k] / (np.sqrt(v[k]) + np.float32(1e-6))
            if k in decay_names:
                upd = upd + np.float32(0.01) * p[k]
            p[k] = p[k] - np.float32(lr) * upd
    return p, m, v


def test_adamw_matches_numpy_reference_and_names_slots():
    rng = np.random.default_rng(0)
    shapes = {
        "layer/dense/kernel": (3, 4),
        "layer/dense/bias": (4,),
        "layer/LayerNorm/gamma": (4,),
        "emb/word_embeddings": (5, 3),
    }
    params = {
        k: rng.normal(size=s).astype(np.float32) for k, s in shapes.items()
    }
    tf_vars = {
        k: tf.Variable(x, name=k.replace("/", "_")) for k, x in params.items()
    }
    names = {id(v): k for k, v in tf_vars.items()}
    opt = optimization.create_optimizer(
        1e-1, 10, 2, name_fn=lambda var: names[id(var)]
    )
    opt.build(list(tf_vars.values()))
    grads_seq = [
        {
            k: (rng.normal(size=s) * 3).astype(np.float32)
            for k, s in shapes.items()
        }
        for _ in range(4)
    ]
    for grads in grads_seq:
        opt.apply_gradients(
            [(tf.constant(grads[k]), tf_vars[k]) for k in shapes]
        )
    lrs = [0.0, 0.05, 0.08, 0.07]
    want_p, want_m, want_v = _numpy_adamw(
        params, grads_seq, lrs, {"layer/dense/kernel", "emb/word_embeddings"}
    )
    ckpt_vars = opt.checkpoint_variables()
    assert int(ckpt_vars["global_step"].numpy()) == 4
    assert ckpt_vars["global_step"].dtype == "int64"
    for k in shapes:
        # TF kernels against the numpy reference: a few float32 element-wise
        # operations per step and one global-norm sum (float32 here, float64
        # there), no long accumulations: 1e-6 of the weights' magnitude
        # (one float32 ulp is 1.2e-7 of it), far below any change of the
        # update rule (weight decay on a bias, a misplaced epsilon).
        tolerance.assert_float32_close(
            tf_vars[k].numpy(), want_p[k], rel=1e-6, err_msg=k
        )
        np.testing.assert_allclose(
            ckpt_vars[f"{k}/adam_m"].numpy(), want_m[k], atol=1e-6
        )
        np.testing.assert_allclose(
            ckpt_vars[f"{k}/adam_v"].numpy(), want_v[k], rtol=1e-5, atol=1e-9
        )


def test_should_apply_false_keeps_weights_but_counts_step():
    var = tf.Variable([1.0, 2.0], name="w")
    opt = optimization.create_optimizer(1.0, 10, 0)
    opt.build([var])
    opt.apply([tf.constant([1.0, 1.0])], [var], should_apply=tf.constant(False))
    np.testing.assert_array_equal(var.numpy(), [1.0, 2.0])
    assert int(opt.global_step.numpy()) == 1
    assert not np.any(opt.checkpoint_variables()["w/adam_m"].numpy())


def test_a_traced_update_adds_a_call_per_variable_not_the_formula(
    monkeypatch,
):
    """On TensorFlow the update of each kind of variable (decayed or not)
    is traced once and called per variable: 17 graph ops a variable here
    (reads, norm, clip, the call, assigns), 35 when each variable's formula
    was traced anew. It computes what the formula traced inline computes, bit for
    bit, and a changed constant traces a new rule."""
    rng = np.random.default_rng(0)
    shapes = [(6, 4), (4,)] * 12
    start = [rng.normal(size=s).astype(np.float32) for s in shapes]
    grads = [rng.normal(size=s).astype(np.float32) for s in shapes]

    def train(inline):
        if inline:
            monkeypatch.setattr(
                optimization.AdamWeightDecayOptimizer,
                "_update_rule",
                lambda self, decay, arrays: (
                    lambda *a: optimization.update_rules.adam_update(
                        *a, decay, self
                    )
                ),
            )
        else:
            monkeypatch.undo()
        names = ["kernel", "bias"] * 12
        variables = [
            tf.Variable(x, name=f"{n}_{i}")
            for i, (x, n) in enumerate(zip(start, names, strict=True))
        ]
        opt = optimization.create_optimizer(0.1, 10, 0)
        opt.build(variables)
        step = tf.function(
            lambda: opt.apply([tf.constant(g) for g in grads], variables),
            autograph=False,
        )
        ops = len(step.get_concrete_function().graph.get_operations())
        step()
        opt.epsilon = 0.5  # Traced anew with it.
        step = tf.function(step.python_function, autograph=False)
        step()
        return ops, [v.numpy() for v in variables]

    inline_ops, inline = train(inline=True)
    traced_ops, traced = train(inline=False)
    per_variable = (inline_ops - traced_ops) / len(shapes)
    assert traced_ops / len(shapes) < 25 and per_variable > 10, (
        inline_ops,
        traced_ops,
    )
    for got, want in zip(traced, inline, strict=True):
        np.testing.assert_array_equal(got, want)


def test_lamb_and_unknown_type():
    var = tf.Variable(np.full([4], 2.0, np.float32), name="kernel")
    opt = optimization.create_optimizer(0.1, 10, 0, optimizer_type="lamb")
    opt.build([var])
    opt.apply_gradients([(tf.constant([1.0, -1.0, 1.0, -1.0]), var)])
    # The trust ratio makes the step lr * ||w||: here 0.1 * 4 = 0.4 in norm.
    step = np.linalg.norm(var.numpy() - 2.0)
    assert step == pytest.approx(0.4, rel=1e-4)
    with pytest.raises(ValueError, match="optimizer_type"):
        optimization.create_optimizer(0.1, 10, 0, optimizer_type="sgd")


def test_unbuilt_variable_is_a_clear_error():
    var = tf.Variable([1.0], name="w")
    other = tf.Variable([1.0], name="other")
    opt = optimization.create_optimizer(0.1, 10, 0)
    opt.build([var])
    with pytest.raises(ValueError, match="not passed to build"):
        opt.apply_gradients([(tf.constant([1.0]), other)])


def _golden_steps(golden_dir):
    return json.loads(
        (golden_dir / "tiny_after_3_steps" / "steps.json").read_text()
    )


FEATURE_NAMES = feature_names.PRETRAINING_FEATURES


class _TinyRun:
    """BertPretrainer from golden tiny_init and the original's optimizer."""

    def __init__(self, golden_dir, checkpoint):
        from modeling import config as config_lib
        from modeling import losses
        from modeling import models

        cfg = config_lib.BertConfig.from_json_file(
            str(golden_dir / "tiny_init" / "bert_config.json")
        )
        self.model = models.BertPretrainer(cfg)
        self.opt = optimization.create_optimizer(1e-2, 10, 2)
        self.opt.build(self.model.trainable_variables)
        reader = tf.train.load_checkpoint(str(checkpoint))
        present = reader.get_variable_to_shape_map()
        for name, var in self.variables().items():
            if name in present:
                var.assign(reader.get_tensor(name))
        data = np.load(golden_dir / "tiny_outputs.npz")
        self.features = {k: tf.constant(data[k]) for k in FEATURE_NAMES}
        self._losses = losses.pretraining_losses

    def variables(self):
        out = {
            optimization.default_variable_name(v): v
            for v in self.model.trainable_variables
        }
        out.update(self.opt.checkpoint_variables())
        return out

    def step(self):
        with tf.GradientTape() as tape:
            outputs = self.model(self.features, training=False)
            loss = self._losses(outputs, self.features)["total_loss"]
        variables = self.model.trainable_variables
        grads = tape.gradient(loss, variables)
        self.opt.apply_gradients(zip(grads, variables))
        return float(loss)


def test_three_steps_reproduce_the_original_optimizer(golden_dir):
    run = _TinyRun(golden_dir, golden_dir / "tiny_init" / "bert_model.ckpt")
    losses = [run.step() for _ in range(3)]
    steps = _golden_steps(golden_dir)
    np.testing.assert_allclose(
        losses, steps["losses_before_each_step"], rtol=0, atol=1e-5
    )
    golden = tf.train.load_checkpoint(
        str(golden_dir / "tiny_after_3_steps" / "model.ckpt-3")
    )
    names = set(golden.get_variable_to_shape_map())
    ours = run.variables()
    assert names == set(ours)  # every weight, adam_m, adam_v, global_step
    assert int(ours["global_step"].numpy()) == golden.get_tensor("global_step")
    # Adam's slots on their own scale (adam_v is at most 3.4e-5 here: an
    # absolute 1e-5 could not fail), each weight on its magnitude's and on
    # what Adam's m / sqrt(v) amplifies of its gradient's rounding. 1e-4:
    # three updates at learning rate 1e-2 from gradients computed on
    # another machine, by another program.
    tolerance.assert_checkpoints_close(
        {name: np.asarray(v) for name, v in ours.items()},
        {name: golden.get_tensor(name) for name in names},
        1e-4,
        "the original's 3 steps",
        1e-2,
    )


def test_resume_from_the_originals_checkpoint_continues(golden_dir):
    resumed = _TinyRun(
        golden_dir, golden_dir / "tiny_after_3_steps" / "model.ckpt-3"
    )
    assert int(resumed.opt.global_step.numpy()) == 3
    m = resumed.variables()["cls/predictions/output_bias/adam_m"].numpy()
    assert np.any(m != 0)  # slots restored, not zero
    # The 4th update uses lr(3) = 1e-2 * (1 - 3/10).
    assert float(resumed.opt.learning_rate) == pytest.approx(7e-3)
    resumed.step()
    assert int(resumed.opt.global_step.numpy()) == 4
    straight = _TinyRun(
        golden_dir, golden_dir / "tiny_init" / "bert_model.ckpt"
    )
    for _ in range(4):
        straight.step()
    a, b = resumed.variables(), straight.variables()
    tolerance.assert_checkpoints_close(
        {name: np.asarray(v) for name, v in a.items()},
        {name: np.asarray(v) for name, v in b.items()},
        1e-4,  # As above: the original's 3 steps are on another machine.
        "resumed from the original's checkpoint",
        1e-2,
    )


def test_accumulated_rows_are_clipped_as_one_batch():
    """Two micro-batches' word-embedding IndexedSlices, accumulated as the
    Trainer does (steps._counted/_add/_scaled) and given as a
    CountedGradient: the clip norm counts their rows one by one, as the
    one batch's IndexedSlices (both micro-batches' rows, halved): the same
    norm and update. Summed rows (a dense gradient) count otherwise."""
    from modeling.training import steps

    names = {}
    emb = tf.Variable(np.zeros((5, 3), np.float32), name="emb")
    names[id(emb)] = "bert/embeddings/word_embeddings"
    rng = np.random.default_rng(1)
    parts = [
        tf.IndexedSlices(
            tf.constant(rng.normal(size=(4, 3)).astype(np.float32) * 3),
            tf.constant(indices),
            tf.constant([5, 3]),
        )
        for indices in ([0, 1, 1, 2], [1, 2, 2, 4])
    ]
    one_batch = tf.IndexedSlices(
        tf.concat([p.values for p in parts], 0) / 2,
        tf.concat([p.indices for p in parts], 0),
        tf.constant([5, 3]),
    )
    counted = steps._counted([parts[0]])[0]
    counted = steps._add(counted, steps._counted([parts[1]])[0])
    counted = steps._scaled(counted, 0.5)
    results = []
    for grad in (one_batch, counted, tf.convert_to_tensor(counted.dense)):
        emb.assign(tf.zeros_like(emb))
        opt = optimization.create_optimizer(
            1e-1, 10, 0, name_fn=lambda var: names[id(var)]
        )
        opt.build([emb])
        norm = float(opt.apply([grad], [emb]))
        results.append((norm, emb.numpy().copy()))
    (norm_one, one), (norm_counted, got), (norm_dense, _) = results
    assert norm_one > 1.0  # The clip is active.
    assert norm_counted == pytest.approx(norm_one, rel=1e-6)
    tolerance.assert_float32_close(got, one)
    # What summed rows counted: another norm, so another clip factor.
    assert abs(norm_dense - norm_one) > 0.05 * norm_one
