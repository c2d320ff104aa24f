"""Google's original BERT release on TensorFlow 2 / Keras 3."""

import setuptools

SCRIPTS = [
    "create_pretraining_data",
    "run_pretraining",
    "run_classifier",
    "run_squad",
    "extract_features",
    "run_ner",
    "run_multiple_choice",
    "run_classifier_with_tfhub",
    "export_hub",
    "predict_lite",
    "run_embeddings",
]

setuptools.setup(
    name="bert-tf2",
    version="0.1.0",
    description=(
        "The original google-research/bert surface (scripts, flags, records, "
        "checkpoints) on TensorFlow 2 and Keras 3."
    ),
    python_requires=">=3.10",
    packages=setuptools.find_packages(include=["modeling", "modeling.*"]),
    # The tokenizer's character classes, precomputed per Unicode version.
    package_data={"modeling.text": ["unicode_ranges.json"]},
    # tokenization, optimization: the original's `import tokenization` and
    # `import optimization` keep working.
    py_modules=SCRIPTS + ["tokenization", "optimization"],
    install_requires=[
        # Pinned together: tensorflow-text wheels are built against one TF minor.
        "tensorflow==2.21.0",
        "tensorflow-text==2.21.1",
        "keras==3.15.1",
        "absl-py>=2.0",
        "numpy>=1.26",
        # CRC-32C in C: TFRecords are written without importing TensorFlow.
        "google-crc32c>=1.5",
        # The standalone LiteRT runtime: TF Lite models (--predict_runtime,
        # the exports' model.tflite) run on it without TensorFlow;
        # tf.lite.Interpreter is deprecated in its favour.
        "ai-edge-litert>=2.3,<3",
    ],
    extras_require={
        # safetensors: reading HuggingFace checkpoints (converter, numpy API only).
        # scikit-learn and seqeval: oracles the metric tests compare with (the
        # task metrics themselves are numpy, as the scripts need no more).
        # ruff: the format and lint check of the suite (tests/lint_test.py).
        "test": [
            "pytest>=8",
            # One pytest worker per core (scripts/test.sh): the suite's
            # tracing, imports and subprocesses are single-threaded.
            "pytest-xdist>=3.5",
            "safetensors>=0.4",
            "scikit-learn>=1.4",
            "seqeval>=1.2.2",
            # Pinned: another version formats differently.
            "ruff==0.17.6",
            # Keras 3's JAX backend (CPU wheel): tests/jax_backend_test.py
            # runs the model, the optimizer and the training step on it.
            # On GPUs install jax[cuda12] or jax[cuda13] instead (docs/gpus-tpus.md).
            "jax[cpu]>=0.6",
        ],
        # apache-beam: create_pretraining_data.py --runner=beam, the same
        # per-shard generation on a cluster engine (DirectRunner, Dataflow,
        # Flink, Spark). Optional: the other modes do not need it.
        "beam": ["apache-beam>=2.77,<3"],
        # The notebooks in notebooks/: papermill runs them with parameters
        # (tests do too), ipykernel is their kernel, matplotlib plots curves.
        "notebooks": ["papermill>=2.6", "ipykernel>=6", "matplotlib>=3.8"],
        # The docs/ pages as a site: mkdocs builds them strictly (a broken
        # page link or anchor fails; scripts/docs_hooks.py adds repository
        # paths), and tests/docs_test.py runs that build in the suite.
        "docs": ["mkdocs==1.6.1"],
        # The peers bench/prediction.py times this project against: HF
        # transformers on PyTorch (and torch.ao int8), ONNX Runtime on the
        # same model exported with torch.onnx (onnx is the exporter's format
        # library). Benchmarks only: no test and no script imports them.
        # PyTorch's CPU wheel is enough (--index-url of its CPU builds).
        "peers": [
            "torch>=2.4",
            "transformers>=4.40",
            "onnxruntime>=1.20",
            "onnx>=1.16",
            # bench/embeddings.py: sentence-transformers' encode and, with
            # its [train] extra (datasets, accelerate), its trainer.
            "sentence-transformers[train]>=3.0",
        ],
    },
    entry_points={
        "console_scripts": [
            f"bert-{name.replace('_', '-')}={name}:run" for name in SCRIPTS
        ],
    },
)
