"""The public API re-exported by modeling/__init__.py resolves."""

import subprocess
import sys

import modeling


def test_every_public_name_resolves():
    for name in modeling.__all__:
        assert getattr(modeling, name) is not None, name


def test_unknown_name_is_an_attribute_error():
    try:
        modeling.NoSuchThing  # noqa: B018
    except AttributeError as e:
        assert "NoSuchThing" in str(e)
    else:
        raise AssertionError("expected AttributeError")


def test_the_original_import_paths_keep_working():
    # The original's users write `import tokenization` and `import modeling`;
    # code written before the subpackages uses `from modeling import
    # tokenization`. All three reach the same module, without Keras.
    code = (
        "import sys\n"
        "import tokenization\n"
        "from modeling import tokenization as from_package\n"
        "import modeling\n"
        "assert tokenization is from_package, (tokenization, from_package)\n"
        "assert tokenization.FullTokenizer is modeling.FullTokenizer\n"
        "assert callable(tokenization._is_control)\n"
        "print('keras' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "False"


_ORIGINAL_NAMES = """
import inspect
import sys

import run_classifier

# The names are resolved on first use: --help still loads no TensorFlow.
assert "tensorflow" not in sys.modules
from modeling.data import classifier_data
from modeling.data import glue

same = {
    "InputExample": classifier_data.InputExample,
    "PaddingInputExample": classifier_data.PaddingInputExample,
    "InputFeatures": classifier_data.InputFeatures,
    "convert_single_example": classifier_data.convert_single_example,
    "convert_examples_to_features":
        classifier_data.convert_examples_to_features,
    "file_based_convert_examples_to_features":
        classifier_data.file_based_convert_examples_to_features,
    "truncate_seq_pair": classifier_data.truncate_seq_pair,
    "_truncate_seq_pair": classifier_data.truncate_seq_pair,
    "DataProcessor": glue.DataProcessor,
    "XnliProcessor": glue.XnliProcessor,
    "MnliProcessor": glue.MnliProcessor,
    "MrpcProcessor": glue.MrpcProcessor,
    "ColaProcessor": glue.ColaProcessor,
}
for name, value in same.items():
    assert getattr(run_classifier, name) is value, name

# The original's signatures (the first parameters; ours may add some).
def params(f):
    return list(inspect.signature(f).parameters)

assert params(run_classifier.InputExample)[:4] == [
    "guid", "text_a", "text_b", "label"]
assert params(run_classifier.InputFeatures) == [
    "input_ids", "input_mask", "segment_ids", "label_id", "is_real_example"]
assert params(run_classifier.convert_single_example)[:5] == [
    "ex_index", "example", "label_list", "max_seq_length", "tokenizer"]
assert params(run_classifier.convert_examples_to_features) == [
    "examples", "label_list", "max_seq_length", "tokenizer"]
assert params(run_classifier.file_based_convert_examples_to_features)[:5] == [
    "examples", "label_list", "max_seq_length", "tokenizer", "output_file"]
assert params(run_classifier._truncate_seq_pair)[:3] == [
    "tokens_a", "tokens_b", "max_length"]

# Estimator-only names import, and calling one names its replacement.
from run_classifier import model_fn_builder  # noqa: E402
from modeling import errors  # noqa: E402

for name, hint in [
    ("model_fn_builder", "BertTextClassifier.from_checkpoint"),
    ("input_fn_builder", "BertTextClassifier.from_checkpoint"),
    ("file_based_input_fn_builder", "classifier_feature_spec"),
    ("create_model", "BertClassifier.from_checkpoint"),
]:
    try:
        getattr(run_classifier, name)(None, 1, is_training=True)
    except errors.EstimatorOnlyError as e:
        assert hint in str(e) and name in str(e), e
    else:
        raise AssertionError(name)
assert model_fn_builder is run_classifier.model_fn_builder

import modeling  # noqa: E402
import optimization  # noqa: E402
import tensorflow as tf  # noqa: E402

try:
    modeling.get_assignment_map_from_checkpoint([], "bert_model.ckpt")
except NotImplementedError as e:
    assert "modeling.load_weights" in str(e), e
else:
    raise AssertionError("get_assignment_map_from_checkpoint")
config = modeling.BertConfig(vocab_size=99)
try:
    modeling.BertModel(config=config, is_training=False,
                       input_ids=tf.zeros([1, 4], tf.int32))
except TypeError as e:
    assert "Keras layer" in str(e) and "is_training" in str(e), e
else:
    raise AssertionError("BertModel took the original's graph arguments")

# optimization: the original's names, giving this project's optimizer.
opt = optimization.create_optimizer(2e-5, 100, 10, False)
assert isinstance(opt, optimization.AdamWeightDecayOptimizer)
assert opt.num_train_steps == 100 and opt.num_warmup_steps == 10
assert opt.weight_decay_rate == 0.01 and opt.clip_norm == 1.0
assert opt.exclude_from_weight_decay == ["LayerNorm", "layer_norm", "bias"]
assert abs(float(opt.learning_rate) - 0.0) < 1e-12  # warmup starts at 0
try:
    optimization.create_optimizer(tf.constant(1.0), 2e-5, 100, 10, False)
except TypeError as e:
    assert "model.compile(optimizer=...)" in str(e), e
else:
    raise AssertionError("the original's loss-first call")
# The class keeps the original class's defaults: no decay, no clipping.
bare = optimization.AdamWeightDecayOptimizer(learning_rate=1e-3)
assert bare.weight_decay_rate == 0.0 and bare.clip_norm is None
# And its positional order: the 7th is the name (clip_norm took it).
named = optimization.AdamWeightDecayOptimizer(
    1e-4, 0.01, 0.9, 0.999, 1e-6, ["LayerNorm", "bias"], "my_adam"
)
assert named.name == "my_adam" and named.clip_norm is None
print("ok")
"""


def test_the_original_run_classifier_and_optimization_names():
    """Notebooks written for the original import run_classifier's
    examples, processors and converters and optimization's optimizer from
    the same module names; Estimator-only names say what replaces them.
    A subprocess: importing run_classifier defines its absl flags."""
    out = subprocess.run(
        [sys.executable, "-c", _ORIGINAL_NAMES],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().splitlines()[-1] == "ok"
