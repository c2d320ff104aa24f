"""TFRecord frames and Example parsing without TensorFlow, checked with it."""

import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from modeling.data import input_pipeline as ip
from modeling.data import tfrecord_io


def _records():
    rng = np.random.default_rng(0)
    out = [b"", b"x"]
    for size in (3, 127, 128, 5000, 70000):
        out.append(rng.integers(0, 256, size, dtype=np.uint8).tobytes())
    return out


def test_local_writer_bytes_equal_tensorflows(tmp_path):
    records = _records()
    ours, theirs = tmp_path / "ours.tfrecord", tmp_path / "tf.tfrecord"
    # A small buffer: several flushes.
    writer = tfrecord_io._LocalWriter(str(ours), buffer_bytes=1000)
    for record in records:
        writer.write(record)
    writer.close()
    with tf.io.TFRecordWriter(str(theirs)) as tf_writer:
        for record in records:
            tf_writer.write(record)
    assert ours.read_bytes() == theirs.read_bytes()
    read = [r.numpy() for r in tf.data.TFRecordDataset(str(ours))]
    assert read == records


def test_masked_crc_of_the_standard_check_string():
    # CRC-32C("123456789") = 0xE3069283; masked: rotate right 15, add delta.
    crc = 0xE3069283
    want = (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF
    assert tfrecord_io.masked_crc32c(b"123456789") == want


def test_parse_example_equals_protobuf():
    features = {
        "input_ids": ip.int_feature([101, 0, 30521, 2**40]),
        "masked_lm_weights": ip.float_feature([1.0, 0.25, 0.0]),
        "next_sentence_labels": ip.int_feature([1]),
        "empty": ip.int_feature([]),
    }
    parsed = tfrecord_io.parse_example(ip.serialize_example(features))
    assert parsed == {
        "input_ids": [101, 0, 30521, 2**40],
        "masked_lm_weights": [1.0, 0.25, 0.0],
        "next_sentence_labels": [1],
        "empty": [],
    }


@pytest.mark.skipif(tfrecord_io._CRC32C is None, reason="no C crc32c")
def test_writing_pretraining_records_does_not_load_tensorflow(tmp_path):
    code = f"""
import sys
from modeling.pretraining_data import records as r
with r.AtomicRecordWriters([{str(tmp_path / "o.tfrecord")!r}]) as out:
    out.write(b"abc")
    out.commit()
assert "tensorflow" not in sys.modules, "TensorFlow was imported"
"""
    subprocess.run([sys.executable, "-c", code], check=True, cwd=tmp_path)
    path = str(tmp_path / "o.tfrecord")
    assert [r.numpy() for r in tf.data.TFRecordDataset(path)] == [b"abc"]
