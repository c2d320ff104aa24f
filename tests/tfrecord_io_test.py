"""TFRecord frames and Example parsing without TensorFlow, checked with it."""

import struct
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


def test_parse_example_reads_what_tensorflow_reads():
    """Bytes lists, negative ints and the unpacked encoding (legal
    protobuf, which TensorFlow's parser accepts) are read, not refused."""
    example = tf.train.Example()
    feature = example.features.feature
    feature["tokens"].bytes_list.value.extend([b"[CLS]", b"a"])
    feature["ids"].int64_list.value.extend([-1, 5])
    feature["w"].float_list.value.extend([0.5])
    packed = example.SerializeToString()
    assert tfrecord_io.parse_example(packed) == {
        "tokens": [b"[CLS]", b"a"],
        "ids": [-1, 5],
        "w": [0.5],
    }
    # The same lists unpacked: one field per value (wire types 0 and 5).
    ids = b"\x08\x07\x08\x09"  # value: 7, value: 9
    weights = b"\x0d" + struct.pack("<f", 0.25)
    feature_ids = b"\x1a" + bytes([len(ids)]) + ids  # Feature.int64_list
    feature_w = b"\x12" + bytes([len(weights)]) + weights  # .float_list

    def entry(name, feature):
        body = b"\x0a" + bytes([len(name)]) + name
        body += b"\x12" + bytes([len(feature)]) + feature
        return b"\x0a" + bytes([len(body)]) + body

    features = entry(b"ids", feature_ids) + entry(b"w", feature_w)
    record = b"\x0a" + bytes([len(features)]) + features
    spec = {
        "ids": tf.io.FixedLenFeature([2], tf.int64),
        "w": tf.io.FixedLenFeature([1], tf.float32),
    }
    parsed = tf.io.parse_single_example(record, spec)
    assert parsed["ids"].numpy().tolist() == [7, 9]
    assert tfrecord_io.parse_example(record) == {"ids": [7, 9], "w": [0.25]}


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
