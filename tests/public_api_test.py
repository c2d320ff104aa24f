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


def test_tokenization_import_does_not_load_keras():
    code = (
        "import sys, modeling.text.tokenization; print('keras' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "False"
