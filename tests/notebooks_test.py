"""The notebooks of notebooks/: their hygiene, and a run of
bert_finetuning_with_cloud_tpus.ipynb on a CPU.

The run executes the notebook top to bottom with papermill (tests/notebooks.py)
from the converted MiniLM checkpoint, for 2 training steps on a slice of
../shared/data/glue/MRPC (the repository's tiny MRPC files when ../shared is
absent), then checks the files it wrote: eval_results.txt, test_results.tsv
and the checkpoint, as run_classifier.py writes them.
"""

import math
import re

import numpy as np
import pytest

import notebooks

FINETUNING = notebooks.NOTEBOOKS / "bert_finetuning_with_cloud_tpus.ipynb"
COLAB_LINK = re.compile(
    r"\(https://colab\.research\.google\.com/github/[\w.-]+/[\w.-]+/blob/"
    r"main/notebooks/(?P<name>[\w.-]+\.ipynb)\)"
)
STEPS = 2


def _all_notebooks():
    return sorted(notebooks.NOTEBOOKS.glob("*.ipynb"))


def test_the_finetuning_notebook_is_there():
    # The hygiene test below is parametrized over the folder; make sure it
    # is not vacuously empty.
    assert FINETUNING in _all_notebooks()


@pytest.mark.parametrize("path", _all_notebooks(), ids=lambda p: p.name)
def test_notebook_hygiene(path):
    """Outputs cleared, a Colab badge to itself, a `parameters` cell first."""
    nb = notebooks.read_notebook(path)
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            assert cell.outputs == [], f"cell {i} has outputs"
            assert cell.execution_count is None, f"cell {i} has a count"
    first = nb.cells[0]
    assert first.cell_type == "markdown"
    assert "colab-badge.svg" in first.source
    links = {m["name"] for m in COLAB_LINK.finditer(first.source)}
    assert links == {path.name}, links
    code = notebooks.code_cells(nb)
    assert notebooks.tagged_cells(nb, notebooks.PARAMETERS_TAG) == code[:1]
    assert notebooks.parameter_names(nb)  # Plain assignments, some.
    assert nb.metadata.kernelspec.name == notebooks.KERNEL
    # Not an executed copy saved over the source.
    assert "papermill" not in nb.metadata


@pytest.fixture(scope="module")
def mrpc_data(tmp_path_factory, optional_shared_dir):
    return notebooks.mrpc_slice(
        tmp_path_factory.mktemp("mrpc"), optional_shared_dir
    )


def _run_finetuning(work, minilm_small_ckpt, mrpc_data, **parameters):
    output_dir = work / "output"
    nb = notebooks.run_notebook(
        FINETUNING,
        {
            "task_name": "MRPC",
            "data_dir": str(mrpc_data),
            "bert_model_dir": str(minilm_small_ckpt),
            "do_lower_case": True,
            "output_dir": str(output_dir),
            "max_seq_length": 64,
            "train_batch_size": 8,
            "learning_rate": 1e-4,
            "max_train_steps": STEPS,
            "random_seed": 1,
            "use_tpu": None,  # Found: none, and no GPU: the CPU.
            "num_predictions_to_show": 3,
            "install_package": False,
            **parameters,
        },
        cwd=work,
    )
    return nb, output_dir


@pytest.fixture(scope="module")
def finetuning_run(tmp_path_factory, minilm_small_ckpt, mrpc_data):
    """The notebook, run once: (executed notebook, its output_dir)."""
    work = tmp_path_factory.mktemp("finetuning_notebook")
    return _run_finetuning(work, minilm_small_ckpt, mrpc_data)


# Slow (~45 s on a slow 2-vCPU VM: the notebook's whole run again): the
# JAX step of run_classifier is held to TensorFlow's in the default run by
# tests/jax_scripts_test.py; this adds the notebook's backend switch.
@pytest.mark.slow
def test_the_notebook_runs_on_jax(
    tmp_path, minilm_small_ckpt, mrpc_data, finetuning_run
):
    """backend="jax" (what it picks on Colab's TPU runtime): the same
    cells on Keras's JAX backend, here over the CPU, give TensorFlow's run's
    files and (dropout aside: each backend draws its own masks) a loss of
    the same size."""
    pytest.importorskip("jax", reason="jax is not installed (the test extra)")
    nb, output_dir = _run_finetuning(
        tmp_path, minilm_small_ckpt, mrpc_data, backend="jax"
    )
    text = notebooks.output_text(nb)
    assert "Keras on JAX: 1 device(s)" in text
    jax_results = _eval_results(output_dir / "eval_results.txt")
    tf_results = _eval_results(finetuning_run[1] / "eval_results.txt")
    assert sorted(jax_results) == sorted(tf_results)
    assert jax_results["global_step"] == str(STEPS)
    assert abs(
        float(jax_results["eval_loss"]) - float(tf_results["eval_loss"])
    ) < 0.1 * float(tf_results["eval_loss"])
    assert (output_dir / "test_results.tsv").exists()


def _rows(path):
    with open(path, encoding="utf-8") as f:
        return sum(1 for _ in f) - 1  # Minus the header.


def _eval_results(path):
    return dict(line.split(" = ") for line in path.read_text().splitlines())


def test_the_run_used_the_parameters_and_the_cpu(finetuning_run):
    nb, _ = finetuning_run
    assert len(notebooks.tagged_cells(nb, notebooks.INJECTED_TAG)) == 1
    text = notebooks.output_text(nb)
    assert "install_package=False" in text
    assert "_DefaultDistributionStrategy: 1 replica(s)" in text
    assert "MRPC:" in text and "labels ['0', '1']" in text


def test_eval_results_are_written_and_sane(finetuning_run, mrpc_data):
    nb, output_dir = finetuning_run
    path = output_dir / "eval_results.txt"
    results = _eval_results(path)
    assert sorted(results) == [
        "eval_accuracy",
        "eval_f1",
        "eval_loss",
        "global_step",
        "loss",
    ]
    assert int(results["global_step"]) == STEPS
    num_dev = _rows(mrpc_data / "dev.tsv")
    accuracy = float(results["eval_accuracy"])
    # A fraction of the dev examples: all of them were scored, once.
    assert 0 <= accuracy <= 1
    assert accuracy * num_dev == pytest.approx(round(accuracy * num_dev))
    assert 0 <= float(results["eval_f1"]) <= 1
    loss = float(results["eval_loss"])
    assert math.isfinite(loss) and loss > 0
    # The notebook shows the file it wrote.
    assert path.read_text() in notebooks.output_text(nb)


def test_predictions_cover_the_test_set(finetuning_run, mrpc_data):
    nb, output_dir = finetuning_run
    num_test = _rows(mrpc_data / "test.tsv")
    lines = (output_dir / "test_results.tsv").read_text().splitlines()
    probabilities = np.array(
        [[float(v) for v in line.split("\t")] for line in lines]
    )
    assert probabilities.shape == (num_test, 2)
    assert np.all(probabilities >= 0)
    np.testing.assert_allclose(probabilities.sum(-1), 1.0, atol=1e-5)
    text = notebooks.output_text(nb)
    assert f"{num_test} predictions for {num_test} test examples" in text
    # Three shown, each with its label, probability and sentences.
    shown = re.findall(r"^([01]) \(p = ([0-9.]+)\)\n  a: (.*)$", text, re.M)
    assert len(shown) == 3
    with open(mrpc_data / "test.tsv", encoding="utf-8") as f:
        first = f.readlines()[1].rstrip("\n").split("\t")
    label, p, sentence = shown[0]
    assert sentence == first[3]
    assert int(label) == int(np.argmax(probabilities[0]))
    assert float(p) == pytest.approx(probabilities[0].max(), abs=1e-3)


def test_output_dir_holds_an_original_format_checkpoint(
    finetuning_run, minilm_small_ckpt
):
    import tensorflow as tf

    from modeling import checkpoints

    nb, output_dir = finetuning_run
    prefix = tf.train.latest_checkpoint(str(output_dir))
    assert prefix == str(output_dir / f"model.ckpt-{STEPS}")
    got = checkpoints.checkpoint_shapes(prefix)
    init = checkpoints.checkpoint_shapes(minilm_small_ckpt / "bert_model.ckpt")
    hidden = init["bert/pooler/dense/kernel"][0]
    # The encoder under the released checkpoint's names and shapes, the new
    # head at the root, Adam slots for both, the step.
    encoder = {n: s for n, s in init.items() if n.startswith("bert/")}
    assert encoder and {n: got.get(n) for n in encoder} == encoder
    assert got["output_weights"] == (2, hidden)
    assert got["output_bias"] == (2,)
    for name in ("output_weights", "bert/pooler/dense/kernel"):
        assert got[f"{name}/adam_m"] == got[f"{name}/adam_v"] == got[name]
    reader = tf.train.load_checkpoint(prefix)
    assert reader.get_tensor("global_step") == STEPS
    # Fine-tuned: the weights moved away from the released ones.
    before = tf.train.load_checkpoint(
        str(minilm_small_ckpt / "bert_model.ckpt")
    )
    name = "bert/encoder/layer_0/attention/self/query/kernel"
    assert not np.array_equal(reader.get_tensor(name), before.get_tensor(name))
    # The notebook lists them.
    text = notebooks.output_text(nb)
    assert f"output_weights: [2, {hidden}]" in text
    assert f"{name}: [{hidden}, {hidden}]" in text


def test_the_harness_refuses_unknown_parameters(tmp_path):
    pytest.importorskip("papermill")
    with pytest.raises(AssertionError, match=r"no parameter \['max_steps'\]"):
        notebooks.run_notebook(FINETUNING, {"max_steps": 2}, cwd=tmp_path)


def test_parameters_must_be_plain_assignments():
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("import os\nsteps = 2")]
    nb.cells[0].metadata["tags"] = [notebooks.PARAMETERS_TAG]
    with pytest.raises(AssertionError, match="line 1 .* not an assignment"):
        notebooks.parameter_names(nb)
    nb.cells[0].source = "steps = 2\nlr: float = 1e-4"
    assert notebooks.parameter_names(nb) == ["steps", "lr"]
