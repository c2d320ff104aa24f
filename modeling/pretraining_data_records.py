"""Pre-training records: a fast exact encoder, compact storage, output files.

`RecordEncoder.encode` writes the bytes of the tf.train.Example that
`input_pipeline.serialize_example` (protobuf, deterministic) writes for the
same instance, without building protobuf objects: the format is small and
fixed (sorted map keys, packed varints, little-endian floats), and tests
compare the two byte for byte. Feature names come from input_pipeline.
"""

import array
import os
import uuid

import tensorflow as tf
from absl import logging

from modeling import input_pipeline

_FLOAT_ONE = b"\x00\x00\x80\x3f"  # 1.0 as a little-endian float32.
_FLOAT_ZERO = b"\x00\x00\x00\x00"


def varint(value):
    """The protobuf base-128 varint of a non-negative int."""
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


class RecordEncoder:
    """Encodes instances as serialized pre-training tf.train.Examples.

    Args:
      max_seq_length: int, length of the sequence features.
      max_predictions_per_seq: int, length of the masked-LM features.
      num_ids: int, one more than the largest token id.
    """

    def __init__(self, max_seq_length, max_predictions_per_seq, num_ids):
        self.max_seq_length = max_seq_length
        self.max_predictions_per_seq = max_predictions_per_seq
        self._varints = [varint(i) for i in range(max(num_ids, 128))]
        ip = input_pipeline
        seq_names = ip.PRETRAINING_SEQ_FEATURES
        pred_names = ip.PRETRAINING_PRED_INT_FEATURES
        (weights_name,) = ip.PRETRAINING_PRED_FLOAT_FEATURES
        # The roles of the names, in the original's order.
        self._names = (*seq_names, *pred_names, weights_name)
        self._names += (ip.NEXT_SENTENCE_LABELS,)
        self._is_float = {weights_name}
        # Deterministic serialization writes map entries sorted by key.
        self._order = sorted(
            range(len(self._names)), key=self._names.__getitem__
        )
        self._keys = [
            b"\x0a" + varint(len(n.encode())) + n.encode() for n in self._names
        ]

    def _length(self, n):
        return self._varints[n] if n < len(self._varints) else varint(n)

    def _entry(self, slot, payload):
        """One map entry (name -> Feature) of Features, with its tag."""
        length = self._length
        if self._names[slot] in self._is_float:
            inner = b"\x0a" + length(len(payload)) + payload
            feature = b"\x12" + length(len(inner)) + inner
        else:
            inner = b"\x0a" + length(len(payload)) + payload
            feature = b"\x1a" + length(len(inner)) + inner
        entry = self._keys[slot] + b"\x12" + length(len(feature)) + feature
        return b"\x0a" + length(len(entry)) + entry

    def encode(self, input_ids, len_a, len_b, positions, labels, is_random):
        """Serializes one instance.

        Args:
          input_ids: list of int, [CLS] A [SEP] B [SEP] after masking.
          len_a, len_b: int, lengths of A and B.
          positions: list of int, masked positions, ascending.
          labels: list of int, the original ids at `positions`.
          is_random: bool, whether B is a random next sentence (label 1).

        Returns:
          bytes, equal to `input_pipeline.serialize_example` of the
          original's features for this instance.
        """
        v = self._varints
        n = len(input_ids)
        pad = self.max_seq_length - n
        m = len(positions)
        pred_pad = self.max_predictions_per_seq - m
        zeros = b"\x00" * pad
        payloads = (
            b"".join([v[i] for i in input_ids]) + zeros,
            b"\x01" * n + zeros,
            b"\x00" * (len_a + 2) + b"\x01" * (len_b + 1) + zeros,
            b"".join([v[p] for p in positions]) + b"\x00" * pred_pad,
            b"".join([v[i] for i in labels]) + b"\x00" * pred_pad,
            _FLOAT_ONE * m + _FLOAT_ZERO * pred_pad,
            b"\x01" if is_random else b"\x00",
        )
        body = b"".join([self._entry(s, payloads[s]) for s in self._order])
        return b"\x0a" + self._length(len(body)) + body


class RecordStore:
    """Serialized records in one bytearray (no per-record objects)."""

    def __init__(self):
        self._data = bytearray()
        self._ends = array.array("q")

    def append(self, record):
        self._data += record
        self._ends.append(len(self._data))

    def __len__(self):
        return len(self._ends)

    def __getitem__(self, index):
        start = self._ends[index - 1] if index else 0
        return bytes(self._data[start : self._ends[index]])

    @property
    def nbytes(self):
        return len(self._data) + self._ends.itemsize * len(self._ends)


def check_output_files(output_files, input_files=()):
    """Raises ValueError for an unusable list of output files."""
    if not output_files:
        raise ValueError("No output file given (--output_file)")
    if len(set(output_files)) != len(output_files):
        raise ValueError(f"Output files repeat: {output_files}")
    inputs = {os.path.abspath(f) for f in input_files}
    for path in output_files:
        if os.path.abspath(path) in inputs:
            raise ValueError(f"Output file {path} is also an input file")
        parent = os.path.dirname(path)
        if parent and "://" not in path and not os.path.isdir(parent):
            raise ValueError(f"Directory of output file {path} does not exist")


class AtomicRecordWriters:
    """TFRecord writers, round-robin over files, published only on success.

    Records go to temporary files beside the outputs; `commit` renames them
    into place, and any exception inside the `with` block removes them, so
    an output file is either complete or absent.
    """

    def __init__(self, output_files):
        self.output_files = list(output_files)
        tag = f".tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self._temps = [f + tag for f in self.output_files]
        self._writers = []
        self._next = 0
        self.num_written = 0

    def __enter__(self):
        for path in self._temps:
            self._writers.append(tf.io.TFRecordWriter(path))
        return self

    def write(self, record):
        self._writers[self._next].write(record)
        self._next = (self._next + 1) % len(self._writers)
        self.num_written += 1

    def commit(self):
        for writer in self._writers:
            writer.close()
        for temp, final in zip(self._temps, self.output_files):
            tf.io.gfile.rename(temp, final, overwrite=True)
        self._temps = []

    def __exit__(self, exc_type, exc, tb):
        for writer in self._writers:
            writer.close()
        for temp in self._temps:
            if tf.io.gfile.exists(temp):
                tf.io.gfile.remove(temp)
        return False


def log_instance(record, inv_vocab):
    """Logs one record as the original logs its first 20 instances."""
    example = tf.train.Example.FromString(record)
    feature = example.features.feature
    ip = input_pipeline
    seq_len = sum(feature[ip.PRETRAINING_SEQ_FEATURES[1]].int64_list.value)
    ids = feature[ip.PRETRAINING_SEQ_FEATURES[0]].int64_list.value[:seq_len]
    logging.info("*** Example ***")
    logging.info("tokens: %s", " ".join(inv_vocab[i] for i in ids))
    names = (
        *ip.PRETRAINING_SEQ_FEATURES,
        *ip.PRETRAINING_PRED_INT_FEATURES,
        *ip.PRETRAINING_PRED_FLOAT_FEATURES,
        ip.NEXT_SENTENCE_LABELS,
    )
    for name in names:
        values = (
            feature[name].int64_list.value or feature[name].float_list.value
        )
        logging.info("%s: %s", name, " ".join(str(x) for x in values))
