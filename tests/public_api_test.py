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
