"""A shared test harness for the layers, heads and models of modeling/.

One `Case` describes a class: its init kwargs, call inputs and expected
output shapes. `run_layer_test` then checks, for that class: build and call,
output shapes, the get_config -> from_config round trip, Keras serialization
through the registered name ("bert>ClassName"), a `.weights.h5` round trip
and a call under the `mixed_bfloat16` policy. `run_model_test` adds, for a
task model, that every variable path is its original checkpoint name and a
`.keras` save / `keras.models.load_model` round trip.
"""

import dataclasses
from typing import Any

import keras
import numpy as np

from modeling import checkpoints
from modeling import models


@dataclasses.dataclass
class Case:
    """A class under test.

    cls: the Layer (or Model) class.
    init_kwargs: dict passed to `cls(**init_kwargs)`.
    args, kwargs: the call inputs, `layer(*args, **kwargs)`.
    output_shape: the expected output shapes, in the structure of the output
        (a tuple of ints for one tensor; a dict / tuple / list of them).
    mixed_dtype: output dtype(s) under `mixed_bfloat16`: one str for every
        output, or a structure like `output_shape`.
    variables: {original checkpoint name: shape} of the layer's variables,
        or None to skip the check; `scope` + a variable's path must be one
        of these names (scope: the layer's parent scope in the model, e.g.
        "bert/encoder/" for a TransformerBlock named "layer_0").
    """

    cls: type
    init_kwargs: dict
    args: tuple = ()
    kwargs: dict = dataclasses.field(default_factory=dict)
    output_shape: Any = None
    mixed_dtype: Any = "bfloat16"
    variables: dict = None
    scope: str = ""


# The global dtype policy set to a name, restored even on failure.
dtype_policy = models.saved_policy


def _flat(outputs):
    return [
        np.asarray(keras.ops.convert_to_numpy(x))
        for x in keras.tree.flatten(outputs)
    ]


def shapes_of(outputs):
    """The output structure with each tensor replaced by its shape tuple."""
    return keras.tree.map_structure(lambda x: tuple(x.shape), outputs)


def assert_same_outputs(actual, expected, atol=0.0):
    """Same structure and (by default bit-identical) values."""
    keras.tree.assert_same_structure(actual, expected)
    for a, e in zip(_flat(actual), _flat(expected)):
        np.testing.assert_allclose(a, e, rtol=0, atol=atol)


def build_and_call(case):
    """Constructs the layer, calls it once; returns (layer, outputs)."""
    layer = case.cls(**case.init_kwargs)
    outputs = layer(*case.args, **case.kwargs)
    return layer, outputs


def check_output_shapes(case, outputs):
    if case.output_shape is not None:
        assert shapes_of(outputs) == case.output_shape


def check_variable_paths_unique(layer):
    """Weights save and load by variable path: no two may share one."""
    paths = [checkpoints.variable_name(v) for v in layer.weights]
    assert len(paths) == len(set(paths)), paths


def check_config_round_trip(case, layer, outputs):
    """from_config(get_config()) gives the same config and, with the
    weights copied over, the same outputs."""
    config = layer.get_config()
    clone = case.cls.from_config(config)
    assert clone.get_config() == config
    clone(*case.args, **case.kwargs)  # builds any lazily built weights
    clone.set_weights(layer.get_weights())
    assert_same_outputs(clone(*case.args, **case.kwargs), outputs)


def check_serialization(case, layer):
    """serialize/deserialize through the registered name "bert>Class"."""
    registered = keras.saving.get_registered_name(case.cls)
    assert registered == f"bert>{case.cls.__name__}"
    assert keras.saving.get_registered_object(registered) is case.cls
    serialized = keras.saving.serialize_keras_object(layer)
    assert serialized["registered_name"] == registered
    revived = keras.saving.deserialize_keras_object(serialized)
    assert type(revived) is case.cls
    assert revived.get_config() == layer.get_config()


def check_weights_round_trip(case, layer, outputs, tmp_path):
    """`.weights.h5` save, then load into a fresh layer: same outputs."""
    path = str(tmp_path / f"{case.cls.__name__}.weights.h5")
    keras.saving.save_weights(layer, path)
    fresh = case.cls(**case.init_kwargs)
    fresh(*case.args, **case.kwargs)
    keras.saving.load_weights(fresh, path)
    assert_same_outputs(fresh(*case.args, **case.kwargs), outputs)


def check_mixed_precision(case):
    """Under mixed_bfloat16: float32 variables, outputs finite and of the
    documented dtypes. The global policy is restored afterwards."""
    with dtype_policy("mixed_bfloat16"):
        layer, outputs = build_and_call(case)
    assert all(v.dtype == "float32" for v in layer.weights)
    expected = case.mixed_dtype
    if isinstance(expected, str):
        expected = keras.tree.map_structure(lambda _: case.mixed_dtype, outputs)
    dtypes = keras.tree.map_structure(
        lambda x: keras.backend.standardize_dtype(x.dtype), outputs
    )
    assert dtypes == expected
    for value in _flat(outputs):
        assert np.all(np.isfinite(value.astype(np.float32)))


def run_layer_test(case, tmp_path, mixed_precision=True):
    """Every check of a layer; returns the layer and its outputs."""
    layer, outputs = build_and_call(case)
    check_output_shapes(case, outputs)
    check_variable_paths_unique(layer)
    if case.variables is not None:
        check_variable_names(layer, case.variables, case.scope)
    check_config_round_trip(case, layer, outputs)
    check_serialization(case, layer)
    check_weights_round_trip(case, layer, outputs, tmp_path)
    if mixed_precision:
        check_mixed_precision(case)
    return layer, outputs


def check_variable_names(layer, expected_shapes, scope=""):
    """Every variable path is an original checkpoint name:
    {scope + variable_name(v): shape} equals `expected_shapes` exactly."""
    actual = {
        scope + checkpoints.variable_name(v): tuple(v.shape)
        for v in layer.weights
    }
    assert len(actual) == len(layer.weights)
    missing = sorted(set(expected_shapes) - set(actual))
    unexpected = sorted(set(actual) - set(expected_shapes))
    assert not missing and not unexpected, (missing, unexpected)
    assert actual == dict(expected_shapes)


def check_model_saving(case, model, outputs, tmp_path):
    """`.keras` save and `keras.models.load_model`: same class, config,
    variable names and outputs."""
    path = str(tmp_path / f"{case.cls.__name__}.keras")
    model.save(path)
    loaded = keras.models.load_model(path)
    assert type(loaded) is case.cls
    assert loaded.get_config() == model.get_config()
    names = [checkpoints.variable_name(v) for v in model.weights]
    assert [checkpoints.variable_name(v) for v in loaded.weights] == names
    assert_same_outputs(loaded(*case.args, **case.kwargs), outputs)


def run_model_test(case, tmp_path, save_keras=True):
    """run_layer_test plus `.keras` saving."""
    model, outputs = run_layer_test(case, tmp_path)
    if save_keras:
        check_model_saving(case, model, outputs, tmp_path)
    return model, outputs
