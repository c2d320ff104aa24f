"""The harness (tests/harness.py) over every layer, head and model class.

Each class of modeling.layers, modeling.encoder, modeling.heads,
modeling.models, modeling.saved_encoder, modeling.preprocessing and
modeling.text_classifier has a case below; `test_every_layer_class_has_a_case`
fails when a new Layer subclass is added without one.
"""

import inspect

import constants
import harness
import hub_helpers
import keras
import numpy as np
import pytest

from modeling import checkpoints
from modeling import config as config_lib
from modeling import encoder
from modeling import heads
from modeling import layers
from modeling import models
from modeling import preprocessing
from modeling import saved_encoder
from modeling import text_classifier
from modeling import text_embedder

B, T, P, L = 2, 8, 3, 3  # batch, sequence, predictions, labels
C = 4  # choices (multiple choice)
F32, BF16 = "float32", "bfloat16"


def _inputs(config):
    rng = np.random.default_rng(0)
    h = config.hidden_size
    ids = rng.integers(0, config.vocab_size, (B, T)).astype("int32")
    mask = np.ones((B, T), "int32")
    mask[1, 5:] = 0
    features = {
        "input_ids": ids,
        "input_mask": mask,
        "segment_ids": (np.arange(T) >= T // 2).astype("int32")[None] * mask,
        "masked_lm_positions": np.array([[1, 2, 4], [0, 3, 4]], "int32"),
    }

    def floats(*shape):
        return rng.normal(size=shape).astype("float32")

    return {
        "features": features,
        "hidden": floats(B, T, h),
        "wide": floats(B, T, config.intermediate_size),
        "pooled": floats(B, h),
        "choices": floats(B, C, h),
        "gathered": floats(B * P, h),
        "table": floats(config.vocab_size, h),
    }


def _encoder_outputs(config, dtype):
    """BertModel's output structure: shapes, or one dtype everywhere."""
    h = config.hidden_size

    def leaf(shape):
        return shape if dtype is None else dtype

    return {
        "sequence_output": leaf((B, T, h)),
        "pooled_output": leaf((B, h)),
        "all_encoder_layers": [leaf((B, T, h))] * config.num_hidden_layers,
        "embedding_output": leaf((B, T, h)),
    }


def _layer_cases(c):
    """{class: Case} for the blocks, encoder pieces and heads, each with the
    checkpoint names its variables have inside a task model."""
    cases = _layer_cases_without_names(c)
    tables = _checkpoint_tables(c)
    for cls, (task, scope) in SCOPES.items():
        case = cases[cls]
        case.scope = scope
        prefix = scope + case.init_kwargs["name"] + "/"
        case.variables = {
            k: v for k, v in tables[task].items() if k.startswith(prefix)
        }
    # The classifier's variables sit at the root scope, outside its name
    # (also the token classifier's and the multiple-choice head's).
    for cls, labels in ROOT_SCOPE_HEADS.items():
        num = L if labels is None else labels
        cases[cls].variables = {
            "output_weights": (num, c.hidden_size),
            "output_bias": (num,),
        }
    return cases


# Heads with root-scope variables: {class: number of labels (None: L)}.
ROOT_SCOPE_HEADS = {
    heads.ClassifierHead: None,
    heads.TokenClassifierHead: None,
    heads.MultipleChoiceHead: 1,
}


# (task, scope): the task model a layer is checked in, and the scope the
# layer sits in there (its parent's path).
SCOPES = {
    layers.BertEmbeddings: ("pretraining", "bert/"),
    # No variables (its seed generator's state is not a weight).
    layers.Dropout: ("pretraining", "bert/encoder/layer_0/attention/self/"),
    layers.SelfAttention: ("pretraining", "bert/encoder/layer_0/attention/"),
    layers.DenseResidual: ("pretraining", "bert/encoder/layer_0/"),
    layers.Attention: ("pretraining", "bert/encoder/layer_0/"),
    layers.Intermediate: ("pretraining", "bert/encoder/layer_0/"),
    layers.TransformerBlock: ("pretraining", "bert/encoder/"),
    encoder.TransformerEncoder: ("pretraining", "bert/"),
    encoder.Pooler: ("pretraining", "bert/"),
    encoder.BertModel: ("pretraining", ""),
    heads.MaskedLMTransform: ("pretraining", "cls/predictions/"),
    heads.MaskedLMHead: ("pretraining", "cls/"),
    heads.NextSentenceHead: ("pretraining", "cls/"),
    heads.PretrainingHeads: ("pretraining", ""),
    heads.SpanHead: ("squad", "cls/"),
    heads.SquadHeads: ("squad", ""),
    # No variables.
    heads.SentencePooling: ("embeddings", "bert_embedder/"),
}


def _checkpoint_tables(c):
    """{task: {name: shape}}, the variables of each task's original
    checkpoint: run_pretraining's, run_classifier's, run_squad's and
    run_embeddings' (the encoder's alone)."""
    h = c.hidden_size
    encoder_names = checkpoints.original_variable_shapes(c, False)
    return {
        "pretraining": checkpoints.original_variable_shapes(c),
        "classifier": dict(
            encoder_names, output_weights=(L, h), output_bias=(L,)
        ),
        "embeddings": encoder_names,
        "multiple_choice": dict(
            encoder_names, output_weights=(1, h), output_bias=(1,)
        ),
        "squad": dict(
            encoder_names,
            **{
                "cls/squad/output_weights": (2, h),
                "cls/squad/output_bias": (2,),
            },
        ),
    }


def _layer_cases_without_names(c):
    x = _inputs(c)
    f = x["features"]
    h, r = c.hidden_size, c.initializer_range
    drop = c.hidden_dropout_prob
    hidden = (B, T, h)
    Case = harness.Case
    return {
        layers.BertEmbeddings: Case(
            layers.BertEmbeddings,
            dict(
                vocab_size=c.vocab_size,
                hidden_size=h,
                type_vocab_size=c.type_vocab_size,
                max_position_embeddings=c.max_position_embeddings,
                initializer_range=r,
                dropout_rate=drop,
                name="embeddings",
            ),
            (f["input_ids"], f["segment_ids"]),
            output_shape=hidden,
        ),
        layers.Dropout: Case(
            layers.Dropout,
            dict(rate=0.1, name="dropout"),
            (x["hidden"],),
            output_shape=hidden,
        ),
        layers.SelfAttention: Case(
            layers.SelfAttention,
            dict(
                num_heads=c.num_attention_heads,
                hidden_size=h,
                initializer_range=r,
                dropout_rate=drop,
                name="self",
            ),
            (x["hidden"], f["input_mask"]),
            output_shape=hidden,
        ),
        layers.DenseResidual: Case(
            layers.DenseResidual,
            dict(
                hidden_size=h,
                initializer_range=r,
                dropout_rate=drop,
                name="output",
            ),
            (x["wide"], x["hidden"]),
            output_shape=hidden,
        ),
        layers.Attention: Case(
            layers.Attention,
            dict(
                num_heads=c.num_attention_heads,
                hidden_size=h,
                initializer_range=r,
                hidden_dropout_prob=drop,
                attention_probs_dropout_prob=c.attention_probs_dropout_prob,
                name="attention",
            ),
            (x["hidden"], f["input_mask"]),
            output_shape=hidden,
        ),
        layers.Intermediate: Case(
            layers.Intermediate,
            dict(
                intermediate_size=c.intermediate_size,
                hidden_act=c.hidden_act,
                initializer_range=r,
                name="intermediate",
            ),
            (x["hidden"],),
            output_shape=(B, T, c.intermediate_size),
        ),
        layers.TransformerBlock: Case(
            layers.TransformerBlock,
            dict(config=c, name="layer_0"),
            (x["hidden"], f["input_mask"]),
            output_shape=hidden,
        ),
        encoder.TransformerEncoder: Case(
            encoder.TransformerEncoder,
            dict(config=c, name="encoder"),
            (x["hidden"], f["input_mask"]),
            output_shape=[hidden] * c.num_hidden_layers,
        ),
        encoder.Pooler: Case(
            encoder.Pooler,
            dict(hidden_size=h, initializer_range=r, name="pooler"),
            (x["hidden"],),
            output_shape=(B, h),
        ),
        encoder.BertModel: Case(
            encoder.BertModel,
            dict(config=c, name="bert"),
            (f,),
            output_shape=_encoder_outputs(c, None),
        ),
        heads.MaskedLMTransform: Case(
            heads.MaskedLMTransform,
            dict(
                hidden_size=h,
                hidden_act=c.hidden_act,
                initializer_range=r,
                name="transform",
            ),
            (x["gathered"],),
            output_shape=(B * P, h),
        ),
        heads.MaskedLMHead: Case(
            heads.MaskedLMHead,
            dict(config=c, name="predictions"),
            (x["gathered"],),
            dict(embedding_table=x["table"]),
            output_shape=(B * P, c.vocab_size),
            mixed_dtype=F32,
        ),
        heads.NextSentenceHead: Case(
            heads.NextSentenceHead,
            dict(hidden_size=h, initializer_range=r, name="seq_relationship"),
            (x["pooled"],),
            output_shape=(B, 2),
            mixed_dtype=F32,
        ),
        heads.PretrainingHeads: Case(
            heads.PretrainingHeads,
            dict(config=c, name="cls"),
            (x["hidden"], x["pooled"], f["masked_lm_positions"]),
            dict(embedding_table=x["table"]),
            output_shape=((B * P, c.vocab_size), (B, 2)),
            mixed_dtype=F32,
        ),
        heads.ClassifierHead: Case(
            heads.ClassifierHead,
            dict(
                num_labels=L,
                hidden_size=h,
                initializer_range=r,
                name="classifier",
            ),
            (x["pooled"],),
            output_shape=(B, L),
            mixed_dtype=F32,
        ),
        heads.TokenClassifierHead: Case(
            heads.TokenClassifierHead,
            dict(
                num_labels=L,
                hidden_size=h,
                initializer_range=r,
                name="classifier",
            ),
            (x["hidden"],),
            output_shape=(B, T, L),
            mixed_dtype=F32,
        ),
        heads.MultipleChoiceHead: Case(
            heads.MultipleChoiceHead,
            dict(hidden_size=h, initializer_range=r, name="classifier"),
            (x["choices"],),
            output_shape=(B, C),
            mixed_dtype=F32,
        ),
        heads.SpanHead: Case(
            heads.SpanHead,
            dict(hidden_size=h, initializer_range=r, name="squad"),
            (x["hidden"],),
            output_shape=((B, T), (B, T)),
            mixed_dtype=F32,
        ),
        heads.SquadHeads: Case(
            heads.SquadHeads,
            dict(hidden_size=h, initializer_range=r, name="cls"),
            (x["hidden"],),
            output_shape=((B, T), (B, T)),
            mixed_dtype=F32,
        ),
        # No weights: a sentence's vector from the token vectors.
        heads.SentencePooling: Case(
            heads.SentencePooling,
            dict(mode="max", normalize=True, name="pooling"),
            (x["hidden"], f["input_mask"]),
            output_shape=(B, h),
            mixed_dtype=F32,
        ),
    }


def _model_cases(c):
    """{class: Case} for the task models; `variables` is the full table of
    the original checkpoint of that task."""
    f = _inputs(c)["features"]
    tables = _checkpoint_tables(c)
    Case = harness.Case
    return {
        models.BertPretrainer: Case(
            models.BertPretrainer,
            dict(config=c),
            (f,),
            output_shape=dict(
                _encoder_outputs(c, None),
                masked_lm_log_probs=(B * P, c.vocab_size),
                next_sentence_log_probs=(B, 2),
            ),
            mixed_dtype=dict(
                _encoder_outputs(c, BF16),
                masked_lm_log_probs=F32,
                next_sentence_log_probs=F32,
            ),
            variables=tables["pretraining"],
        ),
        models.BertClassifier: Case(
            models.BertClassifier,
            dict(config=c, num_labels=L),
            (f,),
            output_shape=(B, L),
            mixed_dtype=F32,
            variables=tables["classifier"],
        ),
        models.BertTokenClassifier: Case(
            models.BertTokenClassifier,
            dict(config=c, num_labels=L),
            (f,),
            output_shape=(B, T, L),
            mixed_dtype=F32,
            variables=tables["classifier"],
        ),
        models.BertMultipleChoice: Case(
            models.BertMultipleChoice,
            dict(config=c),
            (_choice_features(f),),
            output_shape=(B, C),
            mixed_dtype=F32,
            variables=tables["multiple_choice"],
        ),
        models.BertSpanLabeler: Case(
            models.BertSpanLabeler,
            dict(config=c),
            (f,),
            output_shape={"start_logits": (B, T), "end_logits": (B, T)},
            mixed_dtype=F32,
            variables=tables["squad"],
        ),
        # The encoder's variables only: any BERT checkpoint loads as it is.
        models.BertEmbedder: Case(
            models.BertEmbedder,
            dict(config=c, pooling="mean", normalize=True),
            (f,),
            output_shape={"embeddings": (B, c.hidden_size)},
            mixed_dtype=F32,
            variables=tables["embeddings"],
        ),
        # Raw sentence pairs in, the classifier's logits out; its variables
        # are BertClassifier's, still under their checkpoint names.
        text_classifier.BertTextClassifier: Case(
            text_classifier.BertTextClassifier,
            dict(
                classifier=models.BertClassifier(c, L),
                preprocessor=_preprocessor(),
            ),
            (TEXT_PAIRS,),
            output_shape=(B, L),
            mixed_dtype=F32,
            variables=tables["classifier"],
        ),
        # Raw texts in, vectors out; BertEmbedder's variables.
        text_embedder.BertTextEmbedder: Case(
            text_embedder.BertTextEmbedder,
            dict(
                embedder=models.BertEmbedder(c),
                preprocessor=_preprocessor(),
            ),
            (TEXT_PAIRS[0],),
            output_shape=(B, c.hidden_size),
            mixed_dtype=F32,
            variables=tables["embeddings"],
        ),
    }


# Two sentence pairs (B = 2), the second longer than T = 8 tokens.
TEXT_PAIRS = (
    np.array(["Hello world!", "the cat sat on the mat, not the dog"]),
    np.array(["the dog", "a cat is good"]),
)


def _preprocessor():
    return preprocessing.BertPreprocessor(
        constants.TINY_VOCAB, do_lower_case=True, sequence_length=T
    )


def _preprocessing_cases():
    """{class: Case} for the layers without variables (text -> ids)."""
    ints = {name: (B, T) for name in ("input_ids", "input_mask", "segment_ids")}
    return {
        preprocessing.BertPreprocessor: harness.Case(
            preprocessing.BertPreprocessor,
            dict(
                vocabulary=constants.TINY_VOCAB,
                do_lower_case=True,
                sequence_length=T,
            ),
            (TEXT_PAIRS,),
            output_shape=ints,
            mixed_dtype={name: "int32" for name in ints},
            variables={},
        ),
    }


def _choice_features(f):
    """[B, C, T] features: each example's C choices, rolled copies."""
    return {
        name: np.stack([np.roll(f[name], i, axis=0) for i in range(C)], 1)
        for name in ("input_ids", "input_mask", "segment_ids")
    }


def _classes(cases_fn):
    return list(
        cases_fn(config_lib.BertConfig.from_dict(constants.TINY_CONFIG))
    )


LAYER_CLASSES = _classes(_layer_cases)
MODEL_CLASSES = _classes(_model_cases)
# Models over an encoder SavedModel: their case needs an export
# (test_hub_classifier).
HUB_CLASSES = [saved_encoder.BertHubClassifier]
PREPROCESSING_CLASSES = list(_preprocessing_cases())


def _name(cls):
    return cls.__name__


@pytest.fixture
def config(tiny_config_dict):
    return config_lib.BertConfig.from_dict(tiny_config_dict)


@pytest.mark.parametrize("cls", LAYER_CLASSES, ids=_name)
def test_layer(cls, config, tmp_path):
    harness.run_layer_test(_layer_cases(config)[cls], tmp_path)


@pytest.mark.parametrize("cls", MODEL_CLASSES, ids=_name)
def test_model(cls, config, tmp_path):
    harness.run_model_test(_model_cases(config)[cls], tmp_path)


@pytest.fixture(scope="module")
def tiny_hub_encoder(tmp_path_factory):
    """The TINY_CONFIG encoder exported as a TF Hub-style SavedModel."""
    folder = tmp_path_factory.mktemp("tiny_hub")
    return hub_helpers.export_tiny_encoder(folder)[0]


def test_hub_classifier(tiny_hub_encoder, config, tmp_path):
    # The encoder's variables keep the names they were saved under: the
    # classifier checkpoint's table.
    case = harness.Case(
        saved_encoder.BertHubClassifier,
        dict(handle=str(tiny_hub_encoder), num_labels=L),
        (_inputs(config)["features"],),
        output_shape=(B, L),
        mixed_dtype=F32,
        variables=_checkpoint_tables(config)["classifier"],
    )
    harness.run_model_test(case, tmp_path)


def test_a_keras_file_loads_no_remote_encoder_in_safe_mode(tiny_hub_encoder):
    """A .keras file naming a remote encoder (an http or gs:// handle):
    refused in safe mode before anything is fetched; a local one loads."""
    from keras.src.saving import serialization_lib

    config = {"name": "c", "handle": "https://example.com/x", "num_labels": 2}
    with serialization_lib.SafeModeScope(True):
        with pytest.raises(ValueError, match="not trusted to load"):
            saved_encoder.BertHubClassifier.from_config(config)
        local = dict(config, handle=str(tiny_hub_encoder))
        assert (
            saved_encoder.BertHubClassifier.from_config(local).num_labels == 2
        )


@pytest.mark.parametrize("cls", PREPROCESSING_CLASSES, ids=_name)
def test_preprocessing_layer(cls, tmp_path):
    harness.run_layer_test(_preprocessing_cases()[cls], tmp_path)


def test_every_layer_class_has_a_case():
    defined = set()
    modules = (
        layers,
        heads,
        encoder,
        models,
        saved_encoder,
        preprocessing,
        text_classifier,
        text_embedder,
    )
    for module in modules:
        for _, obj in inspect.getmembers(module, inspect.isclass):
            if (
                issubclass(obj, keras.layers.Layer)
                and obj.__module__ == module.__name__
                # A private base (models._TaskModel) is tested through
                # the classes built on it.
                and not obj.__name__.startswith("_")
            ):
                defined.add(obj)
    covered = (
        set(LAYER_CLASSES)
        | set(MODEL_CLASSES)
        | set(HUB_CLASSES)
        | set(PREPROCESSING_CLASSES)
    )
    assert sorted(map(_name, defined - covered)) == []
    # Every layer case checks its checkpoint names (the root-scope heads'
    # are set apart).
    assert set(SCOPES) | set(ROOT_SCOPE_HEADS) == set(LAYER_CLASSES)
    # Models also need the .keras round trip of test_model.
    assert set(MODEL_CLASSES) | set(HUB_CLASSES) == {
        c for c in defined if issubclass(c, keras.Model)
    }


def test_dtype_policy_is_restored_on_failure():
    before = keras.config.dtype_policy().name
    with pytest.raises(RuntimeError):
        with harness.dtype_policy("mixed_bfloat16"):
            raise RuntimeError("boom")
    assert keras.config.dtype_policy().name == before
