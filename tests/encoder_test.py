"""Tests of modeling.encoder.BertModel: names, outputs, defaults, dtypes."""

import time

import keras
import numpy as np
import pytest
import tolerance

from modeling import config as config_lib
from modeling import encoder

LAYER_NAMES = [
    "attention/self/query/kernel",
    "attention/self/query/bias",
    "attention/self/key/kernel",
    "attention/self/key/bias",
    "attention/self/value/kernel",
    "attention/self/value/bias",
    "attention/output/dense/kernel",
    "attention/output/dense/bias",
    "attention/output/LayerNorm/gamma",
    "attention/output/LayerNorm/beta",
    "intermediate/dense/kernel",
    "intermediate/dense/bias",
    "output/dense/kernel",
    "output/dense/bias",
    "output/LayerNorm/gamma",
    "output/LayerNorm/beta",
]


@pytest.fixture
def config(tiny_config_dict):
    return config_lib.BertConfig.from_dict(tiny_config_dict)


@pytest.fixture
def inputs():
    ids = np.array([[1, 5, 9, 2, 0, 0], [1, 7, 2, 8, 3, 2]], np.int32)
    return {
        "input_ids": ids,
        "input_mask": (ids > 0).astype(np.int32),
        "segment_ids": np.array([[0, 0, 0, 0, 0, 0], [0, 0, 0, 1, 1, 1]]),
    }


def test_variable_paths_are_the_original_names(config):
    model = encoder.BertModel(config)
    model.build()
    expected = [
        "bert/embeddings/word_embeddings",
        "bert/embeddings/token_type_embeddings",
        "bert/embeddings/position_embeddings",
        "bert/embeddings/LayerNorm/gamma",
        "bert/embeddings/LayerNorm/beta",
    ]
    for i in range(config.num_hidden_layers):
        expected += [f"bert/encoder/layer_{i}/{n}" for n in LAYER_NAMES]
    expected += ["bert/pooler/dense/kernel", "bert/pooler/dense/bias"]
    assert [w.path for w in model.weights] == expected
    assert model.embeddings.word_embeddings.shape == (99, 32)
    assert all(w.trainable for w in model.weights)


def test_outputs_shapes_and_defaults(config, inputs):
    model = encoder.BertModel(config)
    outputs = model(inputs)
    assert outputs["sequence_output"].shape == (2, 6, 32)
    assert outputs["pooled_output"].shape == (2, 32)
    assert outputs["embedding_output"].shape == (2, 6, 32)
    assert len(outputs["all_encoder_layers"]) == 2
    np.testing.assert_array_equal(
        outputs["all_encoder_layers"][-1], outputs["sequence_output"]
    )
    # Default mask = all ones, default segment ids = zeros.
    only_ids = model({"input_ids": inputs["input_ids"]})
    explicit = model(
        {
            "input_ids": inputs["input_ids"],
            "input_mask": np.ones([2, 6], np.int32),
            "segment_ids": np.zeros([2, 6], np.int32),
        }
    )
    np.testing.assert_allclose(
        only_ids["sequence_output"], explicit["sequence_output"], atol=1e-6
    )
    with pytest.raises(ValueError, match="BertModel needs 'input_ids'"):
        model({"input_mask": inputs["input_mask"]})


def test_padding_does_not_change_real_tokens(config, inputs):
    model = encoder.BertModel(config)
    short = {k: v[:1, :4] for k, v in inputs.items()}
    padded = {k: v[:1] for k, v in inputs.items()}
    a = np.asarray(model(short)["sequence_output"])
    b = np.asarray(model(padded)["sequence_output"])[:, :4]
    # Sequences of 4 and 6: other matmul shapes, other float32 sums. A
    # padded token that leaked into the attention moves values by 1e-2.
    tolerance.assert_float32_close(a, b)


def test_dropout_only_when_training(config, inputs):
    model = encoder.BertModel(config)
    a = np.asarray(model(inputs)["sequence_output"])
    b = np.asarray(model(inputs, training=False)["sequence_output"])
    c = np.asarray(model(inputs, training=True)["sequence_output"])
    np.testing.assert_array_equal(a, b)
    assert np.abs(a - c).max() > 1e-3


def test_mixed_bfloat16_computes_in_bfloat16(config, inputs):
    reference = encoder.BertModel(config)
    reference.build()
    keras.mixed_precision.set_dtype_policy("mixed_bfloat16")
    try:
        model = encoder.BertModel(config)
        model.build()
    finally:
        keras.mixed_precision.set_dtype_policy("float32")
    model.set_weights(reference.get_weights())
    assert {w.dtype for w in model.weights} == {"float32"}
    outputs = model(inputs)
    assert outputs["sequence_output"].dtype == "bfloat16"
    # bfloat16 keeps 8 bits (3.9e-3 relative) per rounding, a few of them
    # per layer: 2% of the outputs' magnitude (seen: 0.7%, 1.7e-3 of 0.26;
    # the absolute 5e-2 this replaced was a fifth of it).
    want = np.asarray(reference(inputs)["pooled_output"])
    np.testing.assert_allclose(
        np.asarray(outputs["pooled_output"], np.float32),
        want,
        atol=2e-2 * np.abs(want).max(),
    )


def test_get_config_round_trip(config):
    model = encoder.BertModel(config, use_one_hot_embeddings=True)
    clone = encoder.BertModel.from_config(model.get_config())
    assert clone.config == config and clone.use_one_hot_embeddings
    assert clone.name == "bert"


def test_names_survive_wrapping_in_a_user_model(config, inputs):
    class Wrapper(keras.Model):
        def __init__(self):
            super().__init__(name="wrapper")
            self.bert = encoder.BertModel(config)
            self.dense = keras.layers.Dense(2, name="head")

        def call(self, features):
            return self.dense(self.bert(features)["pooled_output"])

    model = Wrapper()
    model(inputs)
    paths = [w.path for w in model.weights]
    assert paths[0] == "bert/embeddings/word_embeddings"
    assert "bert/pooler/dense/kernel" in paths
    assert paths[-1] == "wrapper/head/bias"  # the user's own layer


def test_a_dropout_seed_drawn_ahead_gives_the_plain_mask():
    from modeling import layers

    x = np.ones((4, 16, 32), np.float32)
    plain = layers.Dropout(0.3, seed=7)
    ahead = layers.Dropout(0.3, seed=7)
    for _ in range(2):  # the generators advance alike
        want = plain(x, training=True)
        ahead.set_drawn_seed(ahead.draw_seed())
        got = ahead(x, training=True)
        ahead.set_drawn_seed(None)
        np.testing.assert_array_equal(got, want)
    assert float(np.mean(np.asarray(got) == 0)) > 0.2


def _model_with_dropout(config, inputs, seed):
    """A built BertModel with dropout 0.2; its dropout seed generators'
    state variables and their values now (to restore before each run)."""
    config.hidden_dropout_prob = config.attention_probs_dropout_prob = 0.2
    keras.utils.set_random_seed(seed)
    model = encoder.BertModel(config)
    model(inputs)
    states = [
        v for v in model.non_trainable_variables if "seed_generator" in v.path
    ]
    assert states, "no dropout seed generators found"
    return model, states, [v.numpy() for v in states]


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "graph"])
def test_gradient_checkpointing_gives_the_same_loss_and_gradients(
    config, inputs, compiled
):
    """With dropout on: the recomputed blocks drop the units the first pass
    dropped, so the loss and every gradient are those of a plain step."""
    import tensorflow as tf

    model, states, start = _model_with_dropout(config, inputs, seed=3)

    def step():
        with tf.GradientTape() as tape:
            out = model(inputs, training=True)
            loss = tf.reduce_sum(out["sequence_output"] ** 2)
        return loss, tape.gradient(loss, model.trainable_variables)

    results = []
    for enabled in (False, True):
        for v, value in zip(states, start):
            v.assign(value)
        encoder.set_gradient_checkpointing(model, enabled)
        # A new tf.function: the flag is read when the step is traced.
        results.append((tf.function(step) if compiled else step)())
    (loss, grads), (loss_cp, grads_cp) = results
    tolerance.assert_float32_close(loss_cp, loss)
    # One scale for all: some gradients are exactly zero in theory (the key
    # bias: a softmax ignores a constant shift) and only rounding noise.
    scale = max(float(tf.reduce_max(tf.abs(g))) for g in grads if g is not None)
    for g, g_cp, v in zip(grads, grads_cp, model.trainable_variables):
        assert (g is None) == (g_cp is None), v.path
        if g is None:  # the pooler: not in this loss
            continue
        tolerance.assert_float32_close(
            tf.convert_to_tensor(g_cp),
            tf.convert_to_tensor(g),
            scale=scale,
            err_msg=v.path,
        )
    with pytest.raises(ValueError, match="no TransformerEncoder"):
        encoder.set_gradient_checkpointing(keras.layers.Dense(2))


def test_an_xla_step_is_compiled_once(config, inputs):
    """Under XLA (jit_compile: --use_xla, Keras's compile on a GPU) a step
    is compiled on its first call only. Calling a shared block's traced
    function from the compiled step had XLA compile the step again on every
    call: each call took about as long as the first."""
    import tensorflow as tf

    model, _, _ = _model_with_dropout(config, inputs, seed=5)

    def step():
        with tf.GradientTape() as tape:
            out = model(inputs, training=True)
            loss = tf.reduce_sum(out["sequence_output"] ** 2)
        grads = tape.gradient(loss, model.trainable_variables)
        # The pooler is not in this loss (None).
        return [tf.convert_to_tensor(g) for g in grads if g is not None]

    compiled = tf.function(step, autograph=False, jit_compile=True)
    times = []
    for _ in range(4):
        start = time.perf_counter()
        [g.numpy() for g in compiled()]
        times.append(time.perf_counter() - start)
    # First call: tracing and compiling (seconds); then one run of a tiny
    # model (milliseconds). Recompiling made each call 0.6-0.9 of the first.
    assert max(times[1:]) < times[0] / 4, times


def test_blocks_traced_once_compute_as_each_block_traced(
    config, inputs, monkeypatch
):
    """Inside a traced function, the blocks are one traced function called
    with each block's weights and dropout seeds: the outputs, dropout masks
    included, are bit for bit those of every block built on its own, the
    gradients within float32 rounding (the backward pass sums a block's
    gradient terms in another order), the seed generators advance alike,
    and the traced step holds a call per block, not its operations."""
    import tensorflow as tf

    config.num_hidden_layers = 4
    model, states, start = _model_with_dropout(config, inputs, seed=5)

    def step(training):
        with tf.GradientTape() as tape:
            out = model(inputs, training=training)
            loss = tf.reduce_sum(out["sequence_output"] ** 2)
        grads = tape.gradient(loss, model.trainable_variables)
        # The pooler (the last two) is not in this loss.
        return out["all_encoder_layers"], [
            tf.convert_to_tensor(g) for g in grads[:-2]
        ]

    results = {}
    for shared in (False, True):
        monkeypatch.setattr(encoder, "SHARED_BLOCK_TRACE", shared)
        for v, value in zip(states, start):
            v.assign(value)
        traced = tf.function(step, autograph=False)
        ops = {
            training: len(
                traced.get_concrete_function(training).graph.get_operations()
            )
            for training in (True, False)
        }
        results[shared] = (
            traced(True),
            traced(False),
            [v.numpy() for v in states],
            ops,
        )
    (train, infer, after, ops), (train_s, infer_s, after_s, ops_s) = (
        results[False],
        results[True],
    )
    for got, want in zip(train_s[0] + infer_s[0], train[0] + infer[0]):
        np.testing.assert_array_equal(got, want)
    for a, b in zip(after_s, after):
        np.testing.assert_array_equal(a, b)
    scale = max(float(tf.reduce_max(tf.abs(g))) for g in train[1])
    for got, want, v in zip(train_s[1], train[1], model.trainable_variables):
        tolerance.assert_float32_close(got, want, scale=scale, err_msg=v.path)
    for training in (True, False):
        assert ops_s[training] < ops[training] / 2, (training, ops, ops_s)
    # A block changed on its own (frozen) is built on its own: another
    # block's weights or trainability are never assumed for it.
    model.encoder.blocks[2].trainable = False
    for v, value in zip(states, start):
        v.assign(value)
    frozen = tf.function(step, autograph=False)
    for got, want in zip(frozen(False)[0], infer[0]):
        np.testing.assert_array_equal(got, want)
