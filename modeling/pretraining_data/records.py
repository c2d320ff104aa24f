"""Pre-training records: a fast exact encoder and atomic output files.

`RecordEncoder` writes the bytes of the tf.train.Example that
`input_pipeline.serialize_example` (protobuf, deterministic) writes for the
same instance, without building protobuf objects: the format is small and
fixed (sorted map keys, packed varints, little-endian floats), and tests
compare the two byte for byte. `encode_stored` assembles batches of stored
instance skeletons with numpy (token gather, masks, varints) and leaves
only the final byte concatenation to Python. Feature names come from
modeling/data/feature_names.py. Nothing here imports TensorFlow (see tfrecord_io).
"""

import os

import numpy as np
from absl import logging

from modeling import errors
from modeling.data import feature_names
from modeling.data import file_io
from modeling.data import tfrecord_io
from modeling.pretraining_data import generation

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
      vocab_ids: pretraining_data.VocabIds (ids of [CLS], [SEP]; id range).
    """

    def __init__(self, max_seq_length, max_predictions_per_seq, vocab_ids):
        if vocab_ids.num_ids > 1 << 28:
            raise ValueError("Vocabularies above 2**28 ids are not supported")
        self.max_seq_length = max_seq_length
        self.max_predictions_per_seq = max_predictions_per_seq
        self.cls_id, self.sep_id = vocab_ids.cls_id, vocab_ids.sep_id
        # Varints of ids, positions and every length a record can hold.
        table_size = max(vocab_ids.num_ids, 8 * max_seq_length + 8 * 64 + 256)
        self._varints = [varint(i) for i in range(table_size)]
        (ids, mask, segments) = feature_names.PRETRAINING_SEQ_FEATURES
        (positions, labels) = feature_names.PRETRAINING_PRED_INT_FEATURES
        (weights,) = feature_names.PRETRAINING_PRED_FLOAT_FEATURES
        self._key = {
            name: b"\x0a" + varint(len(name.encode())) + name.encode()
            for name in (ids, mask, segments, positions, labels, weights)
            + (feature_names.NEXT_SENTENCE_LABELS,)
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
            self._entry(feature_names.NEXT_SENTENCE_LABELS, bytes([label]))
            for label in (0, 1)
        ]
        self._segment_entries = {}
        self._headers = {ids: {}, labels: {}, positions: {}}
        self._names = (ids, mask, labels, positions, weights, segments)
        self._names += (feature_names.NEXT_SENTENCE_LABELS,)
        # Deterministic serialization writes map entries sorted by key;
        # `_record` gets them in the order of `self._names`.
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

    def _int_entry(self, name, payload):
        """`_entry(name, payload)` with its header cached by length."""
        headers = self._headers[name]
        header = headers.get(len(payload))
        if header is None:
            header = self._entry(name, bytes(len(payload)))[: -len(payload)]
            headers[len(payload)] = header
        return header + payload

    def _segment_entry(self, len_a, len_b):
        key = (len_a, len_b)
        entry = self._segment_entries.get(key)
        if entry is None:
            payload = b"\x00" * (len_a + 2) + b"\x01" * (len_b + 1)
            payload += b"\x00" * (self.max_seq_length - len(payload))
            entry = self._entry(self._names[5], payload)
            self._segment_entries[key] = entry
        return entry

    def _record(self, ids, labels, positions, len_a, len_b, m, is_random):
        """A record from the varint payloads of its three varying features."""
        names = self._names
        entries = (
            self._int_entry(names[0], ids),
            self._mask_entries[len_a + len_b + 3],
            self._int_entry(names[2], labels),
            self._int_entry(names[3], positions),
            self._weight_entries[m],
            self._segment_entry(len_a, len_b),
            self._label_entries[is_random],
        )
        body = b"".join([entries[i] for i in self._order])
        return b"\x0a" + self._length(len(body)) + body

    def encode(self, input_ids, len_a, len_b, positions, labels, is_random):
        """Serializes one instance given as lists.

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
        pred_pad = b"\x00" * (self.max_predictions_per_seq - len(positions))
        ids = b"".join(map(get, input_ids))
        ids += b"\x00" * (self.max_seq_length - len(input_ids))
        return self._record(
            ids,
            b"".join(map(get, labels)) + pred_pad,
            b"".join(map(get, positions)) + pred_pad,
            len_a,
            len_b,
            len(positions),
            1 if is_random else 0,
        )

    def encode_stored(self, corpus, store, order, batch_size=1024):
        """Yields the records of stored instances, in `order`.

        Args:
          corpus: pretraining_data_text.Corpus the instances point into.
          store: pretraining_data.InstanceStore.
          order: sequence of instance indexes.
          batch_size: instances assembled per numpy pass.
        """
        if not len(store):
            return
        arrays = _StoreArrays(corpus, store)
        for start in range(0, len(order), batch_size):
            indices = np.asarray(order[start : start + batch_size], np.int64)
            yield from self._encode_batch(arrays, indices)

    def _encode_batch(self, arrays, indices):
        ids, labels, positions, rows = _assemble(
            arrays, indices, self.max_seq_length, self.max_predictions_per_seq
        )
        ids[:, 0] = self.cls_id
        len_a, len_b, is_random, num = rows
        first_sep, last_sep = len_a + 1, len_a + len_b + 2
        ids[np.arange(len(indices)), first_sep] = self.sep_id
        ids[np.arange(len(indices)), last_sep] = self.sep_id
        buffers = [_varint_rows(x) for x in (ids, labels, positions)]
        (ids_b, ids_e), (lab_b, lab_e), (pos_b, pos_e) = buffers
        len_a, len_b = len_a.tolist(), len_b.tolist()
        num, is_random = num.tolist(), is_random.tolist()
        i0 = l0 = p0 = 0
        for k in range(len(indices)):
            i1, l1, p1 = ids_e[k], lab_e[k], pos_e[k]
            yield self._record(
                ids_b[i0:i1],
                lab_b[l0:l1],
                pos_b[p0:p1],
                len_a[k],
                len_b[k],
                num[k],
                is_random[k],
            )
            i0, l0, p0 = i1, l1, p1


class _StoreArrays:
    """numpy views of a Corpus and an InstanceStore (no copies)."""

    def __init__(self, corpus, store):
        self.tokens = np.frombuffer(corpus.tokens, corpus.tokens.typecode)
        self.meta = np.frombuffer(store.meta, np.int64).reshape(-1, 6)
        self.positions = np.frombuffer(store.positions, np.uint16)
        self.outputs = np.frombuffer(store.outputs, np.int32)


def _assemble(arrays, indices, seq_len, num_preds):
    """Builds [K, seq_len] input ids and [K, num_preds] labels and positions.

    Input ids have their masks applied and 0 where [CLS]/[SEP] go (the
    caller sets those); predictions are sorted by position, padded with 0.
    """
    meta = arrays.meta
    rows = meta[indices].T
    a_start, len_a, b_start, len_b, _, pred_end = rows
    pred_start = np.where(indices > 0, meta[indices - 1, 5], 0)
    j = np.arange(seq_len)
    la, lb = len_a[:, None], len_b[:, None]
    in_a = (j >= 1) & (j <= la)
    in_b = (j >= la + 2) & (j < la + 2 + lb)
    src = np.where(
        in_a, a_start[:, None] + j - 1, b_start[:, None] + j - la - 2
    )
    ids = np.where(in_a | in_b, arrays.tokens[np.where(in_a | in_b, src, 0)], 0)
    ids = ids.astype(np.int64)
    num = pred_end - pred_start
    valid = np.arange(num_preds) < num[:, None]
    src = np.where(valid, pred_start[:, None] + np.arange(num_preds), 0)
    # Positions were stored in draw order; records list them ascending.
    positions = np.where(valid, arrays.positions[src], seq_len).astype(np.int64)
    outputs = np.where(valid, arrays.outputs[src], 0).astype(np.int64)
    by_position = np.argsort(positions, axis=1, kind="stable")
    positions = np.take_along_axis(positions, by_position, 1)
    outputs = np.take_along_axis(outputs, by_position, 1)
    positions = np.where(valid, positions, 0)
    row = np.arange(len(indices))[:, None]
    labels = np.where(valid, ids[row, positions], 0)
    outputs = np.where(outputs == generation.KEEP, labels, outputs)
    vr, vc = np.nonzero(valid)
    ids[vr, positions[vr, vc]] = outputs[vr, vc]
    return ids, labels, positions, (len_a, len_b, rows[4], num)


def _varint_rows(values):
    """Varint-encodes each row of a non-negative int64 [K, W] array.

    Returns:
      (bytes, ends): all rows' encodings back to back, and the list of
      each row's end offset.
    """
    size = 1 + (values >= 1 << 7) + (values >= 1 << 14) + (values >= 1 << 21)
    parts = np.empty(values.shape + (4,), np.uint8)
    for b in range(4):
        more = (size > b + 1).astype(np.int64) << 7 if b < 3 else 0
        parts[..., b] = ((values >> (7 * b)) & 0x7F) | more
    data = parts[np.arange(4) < size[..., None]]
    return data.tobytes(), np.cumsum(size.sum(axis=1)).tolist()


class _NotCommitted(Exception):
    """Ends AtomicRecordWriters' publisher without publishing."""


class AtomicRecordWriters:
    """TFRecord writers, round-robin over files, published only on success.

    Records go to temporary files beside the outputs (file_io.atomic_paths:
    an output that is a symbolic link is written through it); `commit`
    renames them all into place, SIGTERM held, and leaving the `with` block
    without a commit (an exception) removes them: the outputs are all this
    run's, or all as they were.
    """

    def __init__(self, output_files):
        self.output_files = list(output_files)
        self._publisher = None
        self._writers = []
        self._next = 0
        self.num_written = 0

    def __enter__(self):
        try:
            # The files are created and their removal registered in one
            # step: a SIGTERM between the two (no __exit__ runs when
            # __enter__ raises) would leave a temporary file behind.
            with errors.sigterm_deferred():
                self._publisher = file_io.atomic_paths(self.output_files)
                for path in self._publisher.__enter__():
                    self._writers.append(tfrecord_io.open_writer(path))
        except BaseException as e:
            self.__exit__(type(e), e, e.__traceback__)
            raise
        return self

    def write(self, record):
        self._writers[self._next].write(record)
        self._next = (self._next + 1) % len(self._writers)
        self.num_written += 1

    def _close(self):
        """Closes every writer once (even after one fails); raises the
        first error."""
        writers, self._writers = self._writers, []
        file_io.close_all(writers)

    def commit(self):
        self._close()
        publisher, self._publisher = self._publisher, None
        publisher.__exit__(None, None, None)

    def __exit__(self, exc_type, exc, tb):
        try:
            self._close()
        finally:
            publisher, self._publisher = self._publisher, None
            if publisher is not None:
                try:
                    publisher.__exit__(_NotCommitted, _NotCommitted(), None)
                except _NotCommitted:
                    pass
        return False


class ShardRecordFiles:
    """One TFRecord file per input shard, `<prefix>-SSSSS-of-NNNNN`, all
    published together.

    The scale mode with --per_shard_output and the Beam runner write this
    layout: file i holds shard i's records in the order the scale mode
    writes them, so the two compare file by file, and the scale mode's
    single-file output is these files concatenated in order. Shards are
    written in any order, by any process, into a hidden folder beside the
    outputs (`file_io.temp_name` of the prefix); `publish` renames them into
    place once all are there. Leaving the `with` block without `publish`
    (an error, SIGTERM) removes the folder, so nothing is published. The
    "-of-NNNNN" suffix tells a reader whether a set is complete (one that
    globs `<prefix>-*` during the renames, milliseconds, may see part of
    one).

    Args:
      prefix: str, the --output_file.
      work_dir: str, the hidden folder; None for a new one (the process
        that publishes makes it; workers pass its name along).
    """

    def __init__(self, prefix, work_dir=None):
        self.prefix = os.fspath(prefix)
        self.work_dir = work_dir or file_io.temp_name(self.prefix)
        self.num_written = 0

    @staticmethod
    def name(prefix, index, count):
        """The published name of shard `index` of `count`."""
        return f"{prefix}-{index:05d}-of-{count:05d}"

    def path(self, index):
        """Where shard `index` is written before `publish`."""
        return f"{self.work_dir}/shard-{index:05d}"

    def __enter__(self):
        try:
            # Created and its removal registered in one step.
            with errors.sigterm_deferred():
                file_io.make_dirs(self.work_dir)
        except BaseException:
            file_io.remove_if_exists(self.work_dir)
            raise
        return self

    def write(self, index, records):
        """Writes shard `index` (under a temporary name, then renamed: a
        task that a runner retries or runs twice writes the same file).

        Returns:
          (count, bytes) of the records.
        """
        nbytes = 0
        with AtomicRecordWriters([self.path(index)]) as out:
            for record in records:
                out.write(record)
                nbytes += len(record)
            out.commit()
        self.num_written += out.num_written
        return out.num_written, nbytes

    def publish(self, count):
        """Removes an earlier run's shards of the prefix (`stale_files`, of
        any count; a reader globbing the prefix would mix them with these;
        a file of the prefix's own name was refused before the run:
        shards.check_output_files), then renames
        shards 0 .. count - 1 into place, SIGTERM held; then the folder.

        Raises:
          RuntimeError: a shard file is missing (a runner lost work).
        """
        missing = [i for i in range(count) if not file_io.exists(self.path(i))]
        if missing:
            raise RuntimeError(
                f"{len(missing)} of {count} shard files were not written "
                f"(shards {missing[:10]}); nothing was published"
            )
        # An earlier run's files go first and SIGTERM waits: a publish cut
        # short (a kill, a failed rename) leaves an incomplete set, which
        # its "-of-NNNNN" names show, never one mixing two runs' shards.
        with errors.sigterm_deferred():
            for stale in self.stale_files(count):
                logging.warning("Removing %s, from an earlier run", stale)
                file_io.remove_if_exists(stale)
            for index in range(count):
                file_io.publish(
                    self.path(index), self.name(self.prefix, index, count)
                )
            # The shards' data was synced when each was written.
            file_io.sync_folder(os.path.dirname(self.prefix))
        file_io.remove_if_exists(self.work_dir)

    def stale_files(self, count):
        """An earlier run's published shards of this prefix (of any shard
        count: those of `count` are replaced): `--input_file=<prefix>*`
        would read them too."""
        del count  # Every earlier shard goes before the new ones come.
        return stale_shards(self.prefix)

    def first_records(self, count, limit):
        """Up to `limit` published records, from shard 0 on."""
        out = []
        for index in range(count):
            path = self.name(self.prefix, index, count)
            out += tfrecord_io.read_records(path, limit - len(out))
            if len(out) >= limit:
                break
        return out

    def __exit__(self, exc_type, exc, tb):
        file_io.remove_if_exists(self.work_dir)
        return False


def log_instance(record, inv_vocab):
    """Logs one record as the original logs its first 20 instances."""
    feature = tfrecord_io.parse_example(record)
    seq_len = sum(feature[feature_names.PRETRAINING_SEQ_FEATURES[1]])
    ids = feature[feature_names.PRETRAINING_SEQ_FEATURES[0]][:seq_len]
    logging.info("*** Example ***")
    logging.info("tokens: %s", " ".join(inv_vocab[i] for i in ids))
    names = (
        *feature_names.PRETRAINING_SEQ_FEATURES,
        *feature_names.PRETRAINING_PRED_INT_FEATURES,
        *feature_names.PRETRAINING_PRED_FLOAT_FEATURES,
        feature_names.NEXT_SENTENCE_LABELS,
    )
    for name in names:
        values = feature[name]
        logging.info("%s: %s", name, " ".join(str(x) for x in values))


def shard_files(prefix):
    """The files and folders named `<prefix>-NNNNN-of-MMMMM`."""
    return file_io.files_named(prefix, r"-\d{5,}-of-\d{5,}")


def stale_shards(prefix):
    """Shard files `<prefix>-NNNNN-of-MMMMM` of an earlier run. Only files
    that read as this script's records are: a folder of such a name, or a
    text file (a corpus split under such names), stays."""
    return [path for path in shard_files(prefix) if written_here(path)]


def written_here(path):
    """Whether `path` is a file whose first record is a pre-training
    tf.train.Example (a good TFRecord frame holding exactly the seven
    features this script writes), or an empty file (a shard without
    instances; removing it loses nothing). Another tool's records (a
    classifier's features) or payload of the same name are not."""
    try:
        if file_io.is_dir(path):
            return False
        if file_io.size(path) == 0:
            return True
        first = list(tfrecord_io.read_records(path, 1))
        return bool(first) and sorted(
            tfrecord_io.parse_example(first[0])
        ) == sorted(feature_names.PRETRAINING_FEATURES)
    except Exception:  # noqa: BLE001 (not a TFRecord, gone meanwhile, or gfile's errors)
        return False
