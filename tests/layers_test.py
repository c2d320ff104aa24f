"""Tests of modeling.layers: the original's numerics, one piece at a time."""

import math

import keras
import numpy as np
import pytest
from tolerance import assert_float32_close

from modeling import config as config_lib
from modeling import layers


def test_gelu_is_the_tanh_approximation():
    x = np.array([-3.0, -1.0, -0.5, 0.0, 0.5, 1.0, 3.0], np.float32)
    expected = (
        0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
    )
    np.testing.assert_allclose(layers.gelu(x), expected, rtol=1e-6, atol=1e-7)
    # Differs from the exact erf GELU (HF "gelu"): 0.841192 vs 0.841345.
    assert abs(float(layers.gelu(np.float32(1.0))) - 0.841192) < 1e-6


def test_gelu_gradient_is_the_derivative_of_the_formula():
    """The written-out gradient (it keeps less for the backward pass) equals
    autodiff's through the original's formula, in float64 exactly enough to
    be the same function and in float32 within accumulation rounding."""
    import tensorflow as tf

    def plain(x):
        c = math.sqrt(2 / math.pi)
        return 0.5 * x * (1.0 + tf.tanh(c * (x + 0.044715 * x * x * x)))

    for dtype in (tf.float64, tf.float32):
        x = tf.constant(np.linspace(-6, 6, 2001), dtype)
        upstream = tf.constant(
            np.random.default_rng(0).normal(size=2001), dtype
        )
        with tf.GradientTape(persistent=True) as tape:
            tape.watch(x)
            ours, reference = layers.gelu(x), plain(x)
        got = tape.gradient(ours, x, output_gradients=upstream)
        want = tape.gradient(reference, x, output_gradients=upstream)
        if dtype == tf.float64:
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
        else:
            assert_float32_close(got, want)
            assert_float32_close(ours, reference)


def test_get_activation_accepts_original_names():
    assert layers.get_activation("GELU") is layers.gelu
    assert layers.get_activation("linear") is None
    assert layers.get_activation("") is None
    assert layers.get_activation(None) is None
    with pytest.raises(ValueError, match="Unsupported activation: 'swish'"):
        layers.get_activation("swish")


def test_layer_norm_epsilon_and_names():
    ln = layers.layer_norm()
    assert ln.epsilon == 1e-12 and ln.name == "LayerNorm"
    ln.build((None, 4))
    assert [w.name for w in ln.weights] == ["gamma", "beta"]
    # With epsilon 1e-12 a tiny-variance input is still normalised.
    x = np.array([[1e-4, -1e-4, 1e-4, -1e-4]], np.float32)
    np.testing.assert_allclose(ln(x), [[1, -1, 1, -1]], rtol=1e-3)


def test_attention_bias_is_additive_minus_10000():
    bias = layers.attention_bias(np.array([[1, 1, 0]]))
    assert bias.shape == (1, 1, 1, 3)
    np.testing.assert_array_equal(np.asarray(bias).ravel(), [0, 0, -10000])


def test_padded_keys_do_not_change_real_positions():
    attention = layers.SelfAttention(
        num_heads=2, hidden_size=8, initializer_range=0.5, dropout_rate=0.0
    )
    rng = np.random.default_rng(0)
    x = rng.normal(size=(1, 5, 8)).astype(np.float32)
    mask = np.array([[1, 1, 1, 0, 0]], np.int32)
    y = np.asarray(attention(x, mask))
    x2 = x.copy()
    x2[:, 3:] = rng.normal(size=(1, 2, 8))
    y2 = np.asarray(attention(x2, mask))
    np.testing.assert_allclose(y[:, :3], y2[:, :3], atol=1e-6)
    assert not np.allclose(y[:, 3:], y2[:, 3:])
    assert [w.path for w in attention.weights][:2] == [
        "self_attention/query/kernel",
        "self_attention/query/bias",
    ]


def test_embeddings_tables_and_one_hot_lookup():
    kwargs = {
        "vocab_size": 11,
        "hidden_size": 4,
        "type_vocab_size": 2,
        "max_position_embeddings": 6,
        "initializer_range": 0.02,
        "dropout_rate": 0.1,
        "name": "embeddings",
    }
    gather = layers.BertEmbeddings(**kwargs)
    one_hot = layers.BertEmbeddings(use_one_hot_embeddings=True, **kwargs)
    gather.build()
    one_hot.build()
    assert [w.path for w in gather.weights] == [
        "embeddings/word_embeddings",
        "embeddings/token_type_embeddings",
        "embeddings/position_embeddings",
        "embeddings/LayerNorm/gamma",
        "embeddings/LayerNorm/beta",
    ]
    one_hot.set_weights(gather.get_weights())
    ids = np.array([[1, 10, 3]], np.int32)
    segments = np.array([[0, 1, 1]], np.int32)
    np.testing.assert_allclose(
        gather(ids, segments), one_hot(ids, segments), atol=1e-6
    )
    with pytest.raises(ValueError, match="longer than max_position_embeddings"):
        gather(np.zeros([1, 7], np.int32), np.zeros([1, 7], np.int32))


def test_layers_round_trip_through_get_config(tiny_config_dict):
    config = config_lib.BertConfig.from_dict(tiny_config_dict)
    block = layers.TransformerBlock(config, name="layer_0")
    clone = layers.TransformerBlock.from_config(block.get_config())
    assert clone.config == config and clone.name == "layer_0"
    dense = layers.DenseResidual(8, 0.02, 0.1, name="output")
    again = keras.layers.deserialize(keras.layers.serialize(dense))
    assert again.get_config() == dense.get_config()
