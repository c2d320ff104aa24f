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
        # Varints of ids, positions and every length a record can hold.
        table_size = max(num_ids, 8 * max_seq_length + 8 * 64 + 256)
        self._varints = [varint(i) for i in range(table_size)]
        ip = input_pipeline
        (ids, mask, segments) = ip.PRETRAINING_SEQ_FEATURES
        (positions, labels) = ip.PRETRAINING_PRED_INT_FEATURES
        (weights,) = ip.PRETRAINING_PRED_FLOAT_FEATURES
        self._key = {
            name: b"\x0a" + varint(len(name.encode())) + name.encode()
            for name in (ids, mask, segments, positions, labels, weights)
            + (ip.NEXT_SENTENCE_LABELS,)
        }
        # Entries whose bytes depend on a few small ints are precomputed.
        pad_l, pad_p = max_seq_length, max_predictions_per_seq
        self._mask_entries = [
            self._entry(mask, b"\x01" * n + b"\x00" * (pad_l - n))
            for n in range(pad_l + 1)
        ]
        self._weight_entries = [
            self._entry(weights, _FLOAT_ONE * m + _FLOAT_ZERO * (pad_p - m), 2)
            for m in range(pad_p + 1)
        ]
        self._label_entries = [
            self._entry(ip.NEXT_SENTENCE_LABELS, bytes([label]))
            for label in (0, 1)
        ]
        self._segment_entries = {}
        self._names = (ids, mask, labels, positions, weights, segments)
        self._names += (ip.NEXT_SENTENCE_LABELS,)
        # Deterministic serialization writes map entries sorted by key;
        # `encode` lists them in the order of `self._names`.
        self._order = sorted(range(7), key=self._names.__getitem__)

    def _length(self, n):
        return self._varints[n] if n < len(self._varints) else varint(n)

    def _entry(self, name, payload, kind=3):
        """One map entry name -> Feature of Features, with its tag.

        `kind` is the Feature field: 3 int64_list, 2 float_list; either
        list holds one packed field 1.
        """
        length = self._length
        inner = b"\x0a" + length(len(payload)) + payload
        feature = bytes([kind << 3 | 2]) + length(len(inner)) + inner
        entry = self._key[name] + b"\x12" + length(len(feature)) + feature
        return b"\x0a" + length(len(entry)) + entry

    def _segment_entry(self, len_a, len_b):
        key = (len_a, len_b)
        entry = self._segment_entries.get(key)
        if entry is None:
            payload = b"\x00" * (len_a + 2) + b"\x01" * (len_b + 1)
            payload += b"\x00" * (self.max_seq_length - len(payload))
            entry = self._entry(self._names[5], payload)
            self._segment_entries[key] = entry
        return entry

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
        get = self._varints.__getitem__
        names, entry = self._names, self._entry
        pred_pad = b"\x00" * (self.max_predictions_per_seq - len(positions))
        ids = b"".join(map(get, input_ids))
        ids += b"\x00" * (self.max_seq_length - len(input_ids))
        entries = (
            entry(names[0], ids),
            self._mask_entries[len(input_ids)],
            entry(names[2], b"".join(map(get, labels)) + pred_pad),
            entry(names[3], b"".join(map(get, positions)) + pred_pad),
            self._weight_entries[len(positions)],
            self._segment_entry(len_a, len_b),
            self._label_entries[1 if is_random else 0],
        )
        body = b"".join([entries[i] for i in self._order])
        return b"\x0a" + self._length(len(body)) + body


class InstanceStore:
    """Instances as flat arrays of small ints: no per-instance objects.

    About 2 bytes per token and 4 per prediction (ids below 65536), where
    the original keeps lists of str and a serialized record takes ~7 bytes
    per token.

    Args:
      num_ids: int, one more than the largest token id (picks the width).
    """

    def __init__(self, num_ids):
        code = "H" if num_ids <= 1 << 16 else "I"
        self._tokens = array.array(code)
        self._labels = array.array(code)
        self._positions = array.array("H")
        self._ends = array.array("q")  # Per instance: token end, pred end.
        self._meta = array.array("H")  # Per instance: len_a, len_b, label.

    def append(self, input_ids, len_a, len_b, positions, labels, is_random):
        """Adds one instance (arguments as `RecordEncoder.encode`)."""
        self._tokens.extend(input_ids)
        self._positions.extend(positions)
        self._labels.extend(labels)
        self._ends.append(len(self._tokens))
        self._ends.append(len(self._labels))
        self._meta.extend((len_a, len_b, 1 if is_random else 0))

    def __len__(self):
        return len(self._meta) // 3

    def instance(self, index):
        """Returns the arguments of `append` for instance `index`."""
        ends = self._ends
        tok_start = ends[2 * index - 2] if index else 0
        pred_start = ends[2 * index - 1] if index else 0
        tok_end, pred_end = ends[2 * index], ends[2 * index + 1]
        len_a, len_b, is_random = self._meta[3 * index : 3 * index + 3]
        return (
            self._tokens[tok_start:tok_end].tolist(),
            len_a,
            len_b,
            self._positions[pred_start:pred_end].tolist(),
            self._labels[pred_start:pred_end].tolist(),
            bool(is_random),
        )

    @property
    def nbytes(self):
        arrays = (self._tokens, self._labels, self._positions)
        arrays += (self._ends, self._meta)
        return sum(a.itemsize * len(a) for a in arrays)


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
