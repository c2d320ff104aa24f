"""Runs under KERAS_BACKEND=jax, with TensorFlow unimportable, for
tests/jax_backend_test.py (a pytest process runs Keras on TensorFlow, and a
process cannot switch its backend): `python jax_worker.py JOB OUT [GOLDEN]`
writes the arrays a test compares to OUT (.npz).

Jobs:
  golden_outputs  BertPretrainer from golden tiny_init on the tiny batch,
                  dropout off: every output and loss.
  three_steps     3 updates of the original optimizer (lr 1e-2, 10 steps,
                  2 warmup) from tiny_init on the tiny batch, dropout off,
                  through jax_steps.TrainStep: the losses and every
                  checkpoint array (weights, adam_m, adam_v, global_step).
  data_parallel   a small random model, 2 steps on one device and on two
                  (XLA_FLAGS=--xla_force_host_platform_device_count=2) from
                  the same state and global batch: both weights.
  remat           one step with dropout on, without and with gradient
                  checkpointing, from the same state: both weights.
  accumulation    one step on a batch of 8, and one of 2 x 4 micro-batches:
                  both weights (dropout off).
  mixed_bfloat16  the tiny model's loss in float32 and mixed_bfloat16.
  keras_fit       Keras's own fit with the original optimizer (fit_run).
"""

import json
import os
import sys

import numpy as np

from modeling.data.feature_names import PRETRAINING_FEATURES as FEATURES

NO_DROPOUT = {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
SMALL = {
    "vocab_size": 60,
    "hidden_size": 16,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "intermediate_size": 24,
    "max_position_embeddings": 32,
}


def _modules():
    import keras

    from modeling import checkpoints
    from modeling import config as config_lib
    from modeling import encoder
    from modeling import losses
    from modeling import models
    from modeling.training import jax_steps

    assert keras.backend.backend() == "jax", keras.backend.backend()
    return checkpoints, config_lib, encoder, losses, models, jax_steps


def _optimizer(**kwargs):
    """The original optimizer (lr 1e-2, decay to 0 at 10 steps, 2 warmup)."""
    from modeling.training import optimization

    optimizer = optimization.create_optimizer(1e-2, 10, 2)
    for key, value in kwargs.items():
        setattr(optimizer, key, value)
    return optimizer


def _loss_fn(features, outputs):
    from modeling import losses

    return {"loss": losses.pretraining_losses(outputs, features)["total_loss"]}


def _golden_model(golden, overrides=None):
    checkpoints, config_lib, _, _, models, _ = _modules()
    with open(os.path.join(golden, "tiny_init", "bert_config.json")) as f:
        cfg = json.load(f)
    cfg.update(overrides or {})
    model = models.BertPretrainer(config_lib.BertConfig.from_dict(cfg))
    checkpoints.load_weights(model, os.path.join(golden, "tiny_init"))
    data = np.load(os.path.join(golden, "tiny_outputs.npz"))
    return model, {k: data[k] for k in FEATURES}


def _small_batch(batch=8, seq=16, preds=3, seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, SMALL["vocab_size"], (batch, seq)).astype(np.int32)
    mask = np.ones((batch, seq), np.int32)
    mask[::2, seq - 4 :] = 0  # some padding
    segments = np.zeros((batch, seq), np.int32)
    segments[:, seq // 2 :] = 1
    positions = np.sort(
        rng.choice(np.arange(1, seq - 4), (batch, preds)), axis=-1
    ).astype(np.int32)
    return {
        "input_ids": ids,
        "input_mask": mask,
        "segment_ids": segments,
        "masked_lm_positions": positions,
        "masked_lm_ids": np.take_along_axis(ids, positions, axis=1),
        "masked_lm_weights": np.ones((batch, preds), np.float32),
        "next_sentence_labels": rng.integers(0, 2, (batch, 1)).astype(np.int32),
    }


def _small_step(overrides=None, **step_kwargs):
    import jax
    import keras

    step_kwargs.setdefault("devices", jax.devices()[:1])
    _, config_lib, _, _, models, jax_steps = _modules()
    keras.utils.set_random_seed(1)
    cfg = config_lib.BertConfig.from_dict({**SMALL, **(overrides or {})})
    # Built in its constructor: no eager call (each of its ops would be
    # compiled on its own, ~100 small XLA programs).
    model = models.BertPretrainer(cfg)
    batch = _small_batch()
    # epsilon 1: the update is close to linear in the gradient, so two
    # computations of one gradient that differ in float32 summation order
    # give weights as close as their gradients. (With the original's 1e-6,
    # Adam's g / (|g| + eps) turns the rounding of a gradient element near
    # eps into a difference of up to the learning rate; the golden test
    # holds the original constants.)
    step = jax_steps.TrainStep(
        model, _loss_fn, _optimizer(epsilon=1.0), **step_kwargs
    )
    return step, batch


def _weights(step, state):
    return {f"w{i}": np.asarray(w) for i, w in enumerate(state["trainable"])}


def _trained(step, batch, steps=3):
    """After `steps` updates on `batch`: the weights (w<i>), the optimizer's
    step counter (step) and slots (m<i>: adam_m, v<i>: adam_v), and the
    first weights (init<i>): the first update has learning rate 0 (2 warmup
    steps)."""
    out = {
        f"init{i}": np.array(v.value)
        for i, v in enumerate(step.model.trainable_variables)
    }
    state = step.initial_state()
    logs = None
    for _ in range(steps):
        state, logs = step(state, batch)
    out.update(_weights(step, state))
    arrays = step.checkpoint_arrays(state)
    out["step"] = arrays["global_step"]
    for i, name in enumerate(sorted(arrays)):
        slot = name.rsplit("/", 1)[-1]
        if slot in ("adam_m", "adam_v"):
            out[f"{slot[-1]}{i}"] = arrays[name]
    return out, logs


def golden_outputs(golden):
    from modeling import losses

    model, features = _golden_model(golden)
    outputs = model(features, training=False)
    outputs.update(losses.pretraining_losses(outputs, features))
    out = {
        k: np.asarray(v)
        for k, v in outputs.items()
        if k != "all_encoder_layers"
    }
    out["all_encoder_layers"] = np.stack(
        [np.asarray(x) for x in outputs["all_encoder_layers"]]
    )
    return out


def three_steps(golden):
    *_, jax_steps = _modules()
    model, features = _golden_model(golden, NO_DROPOUT)
    import jax

    step = jax_steps.TrainStep(
        model,
        _loss_fn,
        _optimizer(),
        devices=jax.devices()[:1],
    )
    state = step.initial_state()
    losses = []
    for _ in range(3):
        state, logs = step(state, features)
        losses.append(float(logs["loss"]))
    out = step.checkpoint_arrays(state)
    out["_losses"] = np.asarray(losses)
    return out


def data_parallel(_):
    import jax

    devices = jax.devices()
    assert len(devices) == 2, devices
    out = {}
    for n in (1, 2):
        step, batch = _small_step(NO_DROPOUT, devices=devices[:n])
        state = step.initial_state()
        for _ in range(2):
            state, _ = step(state, batch)
        out.update({f"{k}_{n}": v for k, v in _weights(step, state).items()})
    return out


def remat(_):
    out = {}
    for name, enabled in (("plain", False), ("remat", True)):
        _, _, encoder, *_ = _modules()
        step, batch = _small_step()
        encoder.set_gradient_checkpointing(step.model, enabled)
        trained, logs = _trained(step, batch)
        out.update({f"{k}_{name}": v for k, v in trained.items()})
        out[f"loss_{name}"] = np.asarray(logs["loss"])
    return out


def accumulation(_):
    """1 and 2 micro-batches on one device, 2 over 2 devices (`2x2`), the
    first rows with 1 masked token, the others 3; with 2, the compiled
    step's FLOPs per device (XLA's count)."""
    import jax

    out = {}
    for name, n, devices in (("1", 1, 1), ("2", 2, 1), ("2x2", 2, 2)):
        step, batch = _small_step(
            NO_DROPOUT,
            gradient_accumulation_steps=n,
            devices=jax.devices()[:devices],
        )
        # Micro-batches with different masked-token counts: one batch's
        # update still (losses.MLM_DENOMINATOR).
        batch["masked_lm_weights"][:4, 1:] = 0.0
        if n > 1:  # Before training: the steps free the first state.
            cost = (
                step._step.lower(
                    step.initial_state(), step.place_batch(batch), None
                )
                .compile()
                .cost_analysis()
            )
            cost = cost[0] if isinstance(cost, list) else cost
            out[f"flops_{name}"] = np.float64(cost["flops"])
        trained, _ = _trained(step, batch)
        out.update({f"{k}_{name}": v for k, v in trained.items()})
    return out


def nan_gradient(_):
    """A loss whose value is finite and whose gradient is NaN (0 * sqrt at
    0): the step changes no weight and reports a NaN loss."""
    from keras import ops

    step, batch = _small_step(NO_DROPOUT)

    def loss_fn(features, outputs):
        logs = _loss_fn(features, outputs)
        zero = ops.sum(outputs["next_sentence_log_probs"] * 0.0)
        return {"loss": logs["loss"] + 0.0 * ops.sqrt(zero)}

    step.loss_fn = loss_fn
    before = [np.array(v.value) for v in step.model.trainable_variables]
    state = step.initial_state()
    state, logs = step(state, batch)
    out = {"loss": np.asarray(logs["loss"])}
    out.update({f"before{i}": w for i, w in enumerate(before)})
    out.update(
        {f"after{i}": np.asarray(w) for i, w in enumerate(state["trainable"])}
    )
    return out


def accumulation_rows(_):
    """A classifier (its word-embedding table only gathered) over 1 and 2
    micro-batches of a batch with repeated tokens, loss x10 so the clip
    acts: the updates (u1_<i>, u2_<i>)."""
    import jax
    import keras

    _, config_lib, _, losses, models, jax_steps = _modules()
    from modeling import heads

    heads.CLASSIFIER_DROPOUT = 0.0  # One model function for 8 rows or 2x4.
    cfg = config_lib.BertConfig.from_dict({**SMALL, **NO_DROPOUT})
    rng = np.random.default_rng(0)
    batch = {
        "input_ids": rng.integers(5, 12, (8, 16)).astype(np.int32),
        "input_mask": np.ones((8, 16), np.int32),
        "segment_ids": np.zeros((8, 16), np.int32),
        "label_ids": rng.integers(0, 2, (8,)).astype(np.int32),
    }

    def loss_fn(features, logits):
        nll = losses.softmax_cross_entropy(logits, features["label_ids"])
        return {"loss": 10.0 * keras.ops.mean(nll)}

    out = {}
    for n in (1, 2):
        keras.utils.set_random_seed(1)
        model = models.BertClassifier(cfg, 2)
        from modeling.training import optimization

        # No warmup: the first step updates.
        optimizer = optimization.create_optimizer(1e-2, 10, 0)
        optimizer.epsilon = 1.0
        step = jax_steps.TrainStep(
            model, loss_fn, optimizer, n, devices=jax.devices()[:1]
        )
        before = [np.array(v.value) for v in model.trainable_variables]
        state, _ = step(step.initial_state(), batch)
        for i, (w, b) in enumerate(
            zip(state["trainable"], before, strict=True)
        ):
            out[f"u{n}_{i}"] = np.asarray(w) - b
    return out


def predict_cache(_):
    """Two predictors of one model (two evaluations): one compiled program
    per batch shape, not one per evaluation."""
    import jax

    from modeling.training import predictor

    step, batch = _small_step(NO_DROPOUT)
    features = batch  # The pre-training model reads its positions too.
    compiles = []
    jax.monitoring.register_event_duration_secs_listener(
        lambda event, *_, **__: (
            compiles.append(event)
            if event.endswith("backend_compile_duration")
            else None
        )
    )
    for _ in range(2):
        predictor.JaxBackend(step.model)(features)
    # The cache keeps no model alive (a step closing over it did).
    import gc
    import weakref

    model = weakref.ref(step.model)
    del step
    gc.collect()
    return {
        "compiles": np.asarray(len(compiles)),
        "model_alive": np.asarray(model() is not None),
    }


def unused_variables(_):
    """A loss of the masked LM alone: the pooler and the next-sentence head
    take no part (as the pooler in SQuAD, NER and embedder training). The
    weights before and after 3 steps, and the slots, by checkpoint name."""
    from modeling import checkpoints

    step, batch = _small_step(NO_DROPOUT)

    def loss_fn(features, outputs):
        from modeling import losses

        logs = losses.pretraining_losses(outputs, features)
        return {"loss": logs["masked_lm_loss"]}

    step.loss_fn = loss_fn
    names = [
        checkpoints.variable_name(v) for v in step.model.trainable_variables
    ]
    out = {
        f"before:{n}": np.array(v.value)
        for n, v in zip(names, step.model.trainable_variables, strict=True)
    }
    state = step.initial_state()
    for _ in range(3):
        state, _ = step(state, batch)
    for name, value in step.checkpoint_arrays(state).items():
        out[f"after:{name}"] = np.asarray(value)
    return out


def mixed_bfloat16(_):
    import keras

    out = {}
    try:
        for policy in ("float32", "mixed_bfloat16"):
            keras.mixed_precision.set_global_policy(policy)
            step, batch = _small_step(NO_DROPOUT)
            state = step.initial_state()
            state, logs = step(state, batch)
            out[policy] = np.asarray(logs["loss"])
            out[f"{policy}_dtype"] = np.asarray(
                str(state["trainable"][0].dtype)
            )
    finally:
        keras.mixed_precision.set_global_policy("float32")
    return out


def fused_attention(_):
    """SelfAttention's explicit path and its ops.dot_product_attention path
    (what a JAX GPU runs where the attention dropout is off) on one input:
    a full row, a padded row and an all-masked row."""
    import keras

    from modeling import layers

    rng = np.random.default_rng(5)
    attention = layers.SelfAttention(2, 8, 0.5, 0.1, name="self")
    x = rng.normal(0, 1, (3, 6, 8)).astype(np.float32)
    mask = np.array([[1] * 6, [1, 1, 1, 0, 0, 0], [0] * 6], np.int32)
    explicit = attention(x, mask)
    return {
        "explicit": np.asarray(explicit),
        "fused": np.asarray(attention._fused(keras.ops.array(x), mask)),
        "applies_on_cpu": np.asarray(
            layers._fused_attention_applies(False, 0.1)
        ),
    }


def dropout_masks(_):
    """layers.Dropout(0.1) in training on ones: the half-word masks JAX
    draws (layers.half_word_dropout), two calls of one layer, and an odd
    width."""
    import keras

    from modeling import layers

    drop = layers.Dropout(0.1, seed=7)
    ones = keras.ops.ones((512, 768))
    bf16 = layers.half_word_dropout(
        keras.ops.ones((4, 8), "bfloat16"),
        0.1,
        keras.random.SeedGenerator(1).next(),
    )
    return {
        "first": np.asarray(drop(ones, training=True)),
        "second": np.asarray(drop(ones, training=True)),
        "odd": np.asarray(drop(keras.ops.ones((4, 7)), training=True)),
        "inference": np.asarray(drop(ones, training=False)),
        # What a mixed_bfloat16 layer hands it.
        "bfloat16": np.asarray(bf16).astype(np.float32),
        "bfloat16_dtype": np.asarray(str(bf16.dtype)),
    }


def flash_attention(_):
    """modeling/flash_attention.py in Pallas's interpreter against the same
    numbers by XLA ops (its `reference`, with the kernels' dropout mask):
    outputs and gradients, with and without dropout, over 2 blocks of 16
    rows, with a padded example and one without a real key; SelfAttention
    through it; and its kernels lowered to Triton for a GPU (jax.export:
    no GPU needed to lower)."""
    import jax
    import jax.numpy as jnp
    from jax import export

    from modeling import flash_attention as fa
    from modeling import layers

    rng = np.random.default_rng(11)
    b, t, n, d = 3, 32, 2, 16
    q, k, v = (
        jnp.asarray(rng.normal(0, 1, (b, t, n, d)), jnp.float32)
        for _ in range(3)
    )
    mask = np.ones((b, t), np.int32)
    mask[1, 20:] = 0
    mask[2] = 0
    cotangent = jnp.asarray(rng.normal(0, 1, (b, t, n, d)), jnp.float32)
    key = jax.random.PRNGKey(4)
    out = {}
    for rate in (0.0, 0.1):
        seed = fa.seed_from_key(key)

        def kernel(q, k, v, rate=rate):
            context = fa.attention(q, k, v, mask, rate, key, block=16)
            return jnp.sum(context * cotangent), context

        def reference(q, k, v, rate=rate, seed=seed):
            context = fa.reference(q, k, v, mask, rate, seed)
            return jnp.sum(context * cotangent), context

        for name, f in (("kernel", kernel), ("reference", reference)):
            grads, context = jax.grad(f, (0, 1, 2), has_aux=True)(q, k, v)
            out[f"{name}_{rate}"] = np.asarray(context)
            for g, arg in zip(grads, "qkv"):
                out[f"{name}_{rate}_d{arg}"] = np.asarray(g)
    out["kept"] = np.asarray(
        fa.keep_mask(fa.seed_from_key(key), 4, 4, 128, 0.1)
    )

    # SelfAttention through the kernels (the GPU check patched), against
    # the reference on its own projections and drawn seed.
    attention = layers.SelfAttention(n, n * d, 0.5, 0.1, name="self")
    x = jnp.asarray(rng.normal(0, 1, (b, t, n * d)), jnp.float32)
    attention.build(x.shape)
    attention.dropout.set_drawn_seed(key)
    saved = layers.FLASH_ATTENTION, layers._on_jax_gpu
    layers.FLASH_ATTENTION, layers._on_jax_gpu = True, lambda: True
    try:
        out["layer"] = np.asarray(attention(x, mask, training=True))
    finally:
        layers.FLASH_ATTENTION, layers._on_jax_gpu = saved
    attention.dropout.set_drawn_seed(None)
    heads = [
        layer(x).reshape(b, t, n, d)
        for layer in (attention.query, attention.key, attention.value)
    ]
    out["layer_reference"] = np.asarray(
        fa.reference(*heads, mask, 0.1, fa.seed_from_key(key)).reshape(
            b, t, n * d
        )
    )

    # Lowered for a GPU: BERT-base's heads, bfloat16, seq 128.
    shape = jax.ShapeDtypeStruct((4, 128, 12, 64), jnp.bfloat16)

    def loss(q, k, v, mask, key):
        context = fa.attention(q, k, v, mask, 0.1, key, interpret=False)
        return jnp.sum(context.astype(jnp.float32))

    exported = export.export(
        jax.jit(jax.grad(loss, (0, 1, 2))),
        platforms=["cuda"],
        disabled_checks=[
            export.DisabledSafetyCheck.custom_call("__gpu$xla.gpu.triton")
        ],
    )(
        shape,
        shape,
        shape,
        jax.ShapeDtypeStruct((4, 128), jnp.int32),
        jax.ShapeDtypeStruct((2,), jnp.uint32),
    )
    out["triton_kernels"] = np.asarray(
        exported.mlir_module().count("@__gpu$xla.gpu.triton(")
    )
    return out


def fit_run():
    """A small model (embedding, dense, LayerNorm, dense) trained by
    Keras's own `fit` with the one optimizer (`create_optimizer`: clip,
    decay, warmup): 2 epochs of 2 batches, no shuffling, no dropout.
    Runs on whichever backend Keras runs; returns {checkpoint name: array}
    of the weights, slots and global_step."""
    import keras

    from modeling.training import optimization

    rng = np.random.default_rng(3)
    ids = rng.integers(0, 12, (8, 5)).astype(np.int32)
    labels = rng.integers(0, 3, (8,)).astype(np.int32)
    inputs = keras.Input((5,), dtype="int32")
    x = keras.layers.Embedding(12, 6, name="token_table")(inputs)
    x = keras.layers.Dense(6, activation="tanh", name="dense")(x)
    x = keras.layers.LayerNormalization(name="LayerNorm")(x)
    x = keras.layers.GlobalAveragePooling1D()(x)
    logits = keras.layers.Dense(3, name="out")(x)
    model = keras.Model(inputs, logits)
    for var in model.trainable_variables:
        var.assign(rng.normal(0, 0.5, var.shape).astype(np.float32))
    optimizer = optimization.create_optimizer(1e-1, 4, 1)
    model.compile(
        optimizer=optimizer,
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    model.fit(ids, labels, batch_size=4, epochs=2, shuffle=False, verbose=0)
    out = {
        optimization.default_variable_name(v): np.asarray(v)
        for v in model.trainable_variables
    }
    for name, var in optimizer.checkpoint_variables().items():
        out[name] = np.asarray(var)
    return out


def keras_fit(_):
    return fit_run()


GOLDEN_JOBS = ("golden_outputs", "three_steps")
JOBS = {
    f.__name__: f
    for f in (
        golden_outputs,
        three_steps,
        data_parallel,
        remat,
        accumulation,
        accumulation_rows,
        predict_cache,
        nan_gradient,
        unused_variables,
        mixed_bfloat16,
        fused_attention,
        dropout_masks,
        flash_attention,
        keras_fit,
    )
}


def main(argv):
    """main([OUT_DIR, GOLDEN or "", JOB...]): OUT_DIR/JOB.npz for each job
    (jobs that need the golden folder are skipped without one)."""
    out_dir, golden, jobs = argv[0], argv[1] or None, argv[2:]
    for job in jobs:
        if job in GOLDEN_JOBS and golden is None:
            continue
        arrays = JOBS[job](golden)
        np.savez(os.path.join(out_dir, job + ".npz"), **arrays)
    print("tensorflow imported:", "tensorflow" in sys.modules)


if __name__ == "__main__":
    main(sys.argv[1:])
