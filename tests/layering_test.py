"""The library's layering rules (modeling/README.md), checked on the code.

1. Data generation must not pay for TensorFlow (seconds and ~400 MB to
   import): text/ (except the in-graph tokenizer), pretraining_data/, the
   TFRecord and file helpers and the feature names import neither TensorFlow
   nor Keras, directly or through another module.
2. The core never imports tasks/: tasks/ use the library, not the reverse.
   Only the scripts and modeling/flags.py reach into tasks/.
3. Subpackage __init__ files stay light: importing `modeling.data` must not
   load a pipeline, so they hold a docstring and nothing else.
4. Floors: every module sits on one floor (FLOORS, lowest first) and
   imports only from its own floor or below, lazily inside a function or
   not; and no two modules import each other, directly or round a circle.
5. A module over 500 lines says in its docstring why it is one module.
"""

import ast
import json
import pathlib
import subprocess
import sys

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent
LIBRARY = REPO_ROOT / "modeling"

# Modules (dotted names) that must import neither TensorFlow nor Keras.
TF_FREE_PACKAGES = (
    "modeling.text",
    "modeling.pretraining_data",
    # The scripts' Settings: they define the flags before parsing.
    "modeling.tasks.settings",
    # The LiteRT servers (modeling/tasks/lite.py names them).
    "modeling.tasks.lite_servers",
)
TF_FREE_EXCEPTIONS = ("modeling.text.in_graph",)
TF_FREE_MODULES = (
    "modeling",
    "modeling.errors",
    "modeling.progress",
    "modeling.flags",
    "modeling.options",
    "modeling.signals",
    "modeling.training.run_config",
    "modeling.data.feature_names",
    "modeling.data.file_io",
    "modeling.data.tfrecord_io",
    "modeling.data.table_files",
    "modeling.data.conll",
    "modeling.tasks.common",
    "modeling.backend",
    # The flag checks of the export folders (tasks/common.py).
    "modeling.export.folders",
    "modeling.tasks.predictions",
    # The serving path without TensorFlow (modeling/tasks/lite.py) and what it
    # reads with: the predictor's batching, the task kinds' names, the
    # classifier features and the own-data files.
    "modeling.tasks.lite",
    "modeling.training.predictor",
    "modeling.task_kinds",
    "modeling.data.classifier_data",
    "modeling.data.long_inputs",
    "modeling.data.custom",
    # Original-format checkpoints, read and written under the JAX backend on
    # machines without TensorFlow.
    "modeling.checkpoints",
    "modeling.tensor_bundle",
)


# The floors, lowest first; a module's floor is that of the longest prefix
# naming it. base: what everything may use (errors, progress, the backend
# choice, the file helpers and feature names, the checkpoint file format);
# text: tokenizers and vocabularies; model: the forward pass, the heads,
# losses and task kinds, original-format checkpoints; data: examples ->
# features -> records, tf.data pipelines, pre-training data generation, and
# models read from sentence-transformers folders; training: the Trainer,
# its steps, the optimizers and the predictor; serving: exports and the
# Keras API on raw text; tasks: what each script does; flags: the scripts'
# runner.
FLOORS = (
    (
        "base",
        (
            "modeling",
            "modeling.errors",
            "modeling.progress",
            "modeling.backend",
            "modeling.options",
            "modeling.signals",
            "modeling.tensor_bundle",
            "modeling.data.file_io",
            "modeling.data.feature_names",
            "modeling.data.tfrecord_io",
        ),
    ),
    ("text", ("modeling.text",)),
    (
        "model",
        (
            "modeling.config",
            "modeling.row_gradients",
            "modeling.layers",
            "modeling.encoder",
            "modeling.heads",
            "modeling.losses",
            "modeling.models",
            "modeling.task_kinds",
            "modeling.checkpoints",
            "modeling.convert",
        ),
    ),
    (
        "data",
        (
            "modeling.data",
            "modeling.pretraining_data",
            "modeling.sentence_models",
        ),
    ),
    ("training", ("modeling.training",)),
    (
        "serving",
        (
            "modeling.export",
            "modeling.preprocessing",
            "modeling.saved_encoder",
            "modeling.text_model",
            "modeling.text_classifier",
            "modeling.text_embedder",
        ),
    ),
    ("tasks", ("modeling.tasks",)),
    ("flags", ("modeling.flags",)),
)
# The imports that go up a floor, each with its reason.
UPWARD = {
    ("modeling.training.predictor", "modeling.export.tflite"): (
        "the TF Lite runtime of the predictor converts the Keras model it "
        "is given (lazily, only for --predict_runtime=tflite*)"
    ),
}


def _floor(module):
    best = None
    for index, (_, prefixes) in enumerate(FLOORS):
        for prefix in prefixes:
            if module == prefix or module.startswith(prefix + "."):
                if best is None or len(prefix) > best[1]:
                    best = (index, len(prefix))
    assert best is not None, f"{module} is on no floor: add it to FLOORS"
    return best[0]


def _module_name(path):
    parts = path.relative_to(REPO_ROOT).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _library_modules():
    return {_module_name(p): p for p in sorted(LIBRARY.rglob("*.py"))}


def _imported_modules(path):
    """Every module an import statement names, at any depth (lazy imports
    inside functions count too)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            # `from modeling.tasks import common` names modeling.tasks.common.
            names.update(f"{node.module}.{a.name}" for a in node.names)
    return names


def _tf_free_modules():
    out = []
    for name in _library_modules():
        in_package = any(
            name == p or name.startswith(p + ".") for p in TF_FREE_PACKAGES
        )
        if (
            in_package and name not in TF_FREE_EXCEPTIONS
        ) or name in TF_FREE_MODULES:
            out.append(name)
    return out


def test_the_tf_free_modules_exist():
    modules = _library_modules()
    for name in TF_FREE_MODULES + TF_FREE_EXCEPTIONS:
        assert name in modules, f"{name} moved: update the layering rules"
    assert len(_tf_free_modules()) >= 15


def test_data_modules_import_neither_tensorflow_nor_keras():
    # A fresh interpreter: this process has TensorFlow loaded already.
    code = (
        "import importlib, json, sys\n"
        f"names = {json.dumps(_tf_free_modules())}\n"
        "bad = {}\n"
        "for name in names:\n"
        "    importlib.import_module(name)\n"
        "    heavy = [m for m in ('tensorflow', 'keras', 'tensorflow_text')\n"
        "             if m in sys.modules]\n"
        "    if heavy:\n"
        "        bad[name] = heavy\n"
        "        break\n"
        "print(json.dumps(bad))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO_ROOT,
    )
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {}


def test_the_core_never_imports_tasks():
    allowed = {"modeling.flags"}
    offenders = {}
    for name, path in _library_modules().items():
        if name.startswith("modeling.tasks") or name in allowed:
            continue
        tasks = sorted(
            m
            for m in _imported_modules(path)
            if m == "modeling.tasks" or m.startswith("modeling.tasks.")
        )
        if tasks:
            offenders[name] = tasks
    assert offenders == {}


def test_subpackage_inits_are_light():
    for path in sorted(LIBRARY.glob("*/__init__.py")):
        body = ast.parse(path.read_text(encoding="utf-8")).body
        docstring = (
            body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
        )
        assert docstring and len(body) == 1, (
            f"{path.relative_to(REPO_ROOT)} should hold only a docstring"
        )


def test_only_flags_reads_absl_flags():
    for name, path in _library_modules().items():
        if name == "modeling.flags":
            continue
        assert "absl.flags" not in _imported_modules(path), name


def _library_imports():
    """{module: library modules it imports} (a `from package import
    module` counts as the module, not the package)."""
    modules = _library_modules()
    out = {}
    for name, path in modules.items():
        deps = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                subs = [f"{node.module}.{a.name}" for a in node.names]
                found = [m for m in subs if m in modules] or [node.module]
            else:
                continue
            for dep in found:
                while dep and dep not in modules:
                    dep = dep.rpartition(".")[0]
                if dep and dep not in ("modeling", name):
                    deps.add(dep)
        out[name] = deps
    return out


def test_imports_go_down_the_floors():
    imports = _library_imports()
    upward = sorted(
        (name, dep)
        for name, deps in imports.items()
        for dep in deps
        if _floor(dep) > _floor(name)
    )
    described = [
        (a, b, FLOORS[_floor(a)][0], FLOORS[_floor(b)][0]) for a, b in upward
    ]
    assert set(upward) == set(UPWARD), described


def test_no_import_cycles():
    """No strongly connected component of more than one module (Tarjan)."""
    imports = _library_imports()
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in imports[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in imports:
        if v not in index:
            visit(v)
    assert cycles == []


# Modules stay near keras-hub's sizes: one over this many lines says why in
# its docstring.
LONG_MODULE_LINES = 500
LONG_MODULE_REASON = "One module, over 500 lines:"


def test_a_long_module_says_why_it_is_one():
    unexplained = []
    for name, path in _library_modules().items():
        text = path.read_text(encoding="utf-8")
        if text.count("\n") > LONG_MODULE_LINES:
            doc = ast.get_docstring(ast.parse(text)) or ""
            if LONG_MODULE_REASON not in doc:
                unexplained.append(name)
    assert unexplained == []
