"""An empty text is one the tokenizer finds no word in: whitespace only, or
only characters its clean step deletes (control characters, U+0000, U+FFFD).
Every reader of embeddings and classifier input refuses both alike
(tokenization.is_empty_text), but GLUE's files, read as the original reads
them."""

import pytest

from modeling.data import custom
from modeling.data import glue
from modeling.data import table_files
from modeling.text import tokenization


@pytest.mark.parametrize(
    "text, empty",
    [
        ("", True),
        (" \t\n", True),
        ("\x00\x01", True),
        ("\ufffd \u200b", True),  # Deleted (invalid, format character).
        ("\u3000", True),  # Zs: a space.
        ("a", False),
        ("\x00a", False),
        ("\u4e2d", False),
        ("!", False),
    ],
)
def test_is_empty_text(text, empty):
    assert tokenization.is_empty_text(text) is empty
    words = tokenization.BasicTokenizer().tokenize(text)
    assert (not words) is empty


def test_readers_refuse_control_characters_as_whitespace(tmp_path):
    """Run_embeddings' text files (.txt, tables), a GLUE file and a custom
    classifier file: the message of a whitespace-only text, with its line."""
    txt = tmp_path / "texts.txt"
    txt.write_text("the cat\n\x00\x01\n", encoding="utf-8")
    with pytest.raises(ValueError, match=rf"^{txt}:2: empty text$"):
        list(table_files.TextFile(str(txt)).rows())
    tsv = tmp_path / "texts.tsv"
    tsv.write_text("id\ttext\n1\t\x01\x02\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"texts\.tsv line 2: empty or"):
        list(table_files.TextFile(str(tsv)).rows())
    # A GLUE file (QQP's train.tsv has such rows) is read as the original
    # reads it: the converter makes a one-sentence input of it.
    (tmp_path / "train.tsv").write_text(
        "Quality\ti1\ti2\ts1\ts2\n1\t1\t2\ta\t\x7f\n", encoding="utf-8"
    )
    (example,) = glue.get_processor("mrpc").get_train_examples(str(tmp_path))
    assert example.text_b == "\x7f"
    csv = tmp_path / "a.csv"
    csv.write_text("text,label\n\x01,1\n", encoding="utf-8")
    processor = custom.CustomProcessor(files={"train": str(csv)})
    with pytest.raises(ValueError, match="line 2: empty text in column 'text'"):
        processor.get_train_examples()
