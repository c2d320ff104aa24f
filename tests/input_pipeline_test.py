"""Feature specs and deterministic serialization."""

import tensorflow as tf

from modeling.data import input_pipeline as ip


def _pretraining_features(seq=8, preds=3):
    return {
        "input_ids": ip.int_feature([2, 5, 7, 3] + [0] * (seq - 4)),
        "input_mask": ip.int_feature([1] * 4 + [0] * (seq - 4)),
        "segment_ids": ip.int_feature([0] * seq),
        "masked_lm_positions": ip.int_feature([1, 0, 0][:preds]),
        "masked_lm_ids": ip.int_feature([5, 0, 0][:preds]),
        "masked_lm_weights": ip.float_feature([1.0, 0.0, 0.0][:preds]),
        "next_sentence_labels": ip.int_feature([1]),
    }


def test_serialization_is_independent_of_insertion_order():
    feats = _pretraining_features()
    reordered = dict(reversed(list(feats.items())))
    assert ip.serialize_example(feats) == ip.serialize_example(reordered)


def test_decode_roundtrip_casts_ints_to_int32():
    record = ip.serialize_example(_pretraining_features())
    parsed = ip.decode_record(
        tf.constant(record), ip.pretraining_feature_spec(8, 3)
    )
    assert parsed["input_ids"].dtype == tf.int32
    assert parsed["masked_lm_weights"].dtype == tf.float32
    assert parsed["input_ids"].numpy().tolist() == [2, 5, 7, 3, 0, 0, 0, 0]
    assert parsed["next_sentence_labels"].numpy().tolist() == [1]


def test_trim_padding_cuts_to_the_longest_row_rounded_up():
    mask = tf.constant([[1] * 5 + [0] * 11, [1] * 9 + [0] * 7])
    batch = {
        "input_ids": mask * 7,
        "input_mask": mask,
        "segment_ids": mask * 0,
        "label_ids": tf.constant([1, 0]),
    }
    out = ip.trim_padding(batch, multiple=4)
    assert out["input_ids"].shape == (2, 12)  # 9 rounded up to 12
    assert out["input_mask"].numpy().tolist() == mask[:, :12].numpy().tolist()
    assert out["label_ids"].numpy().tolist() == [1, 0]
    # Never longer than the records.
    assert ip.trim_padding(batch, multiple=32)["input_ids"].shape == (2, 16)
    assert ip.trim_padding(batch, multiple=1)["segment_ids"].shape == (2, 9)


def test_padding_multiple_bounds_the_xla_shapes():
    assert ip.padding_multiple(128) == 8
    assert ip.padding_multiple(128, use_xla=True) == 32
    assert ip.padding_multiple(512, use_xla=True) == 128
    assert ip.padding_multiple(20, use_xla=True) == 8
    for seq in (16, 100, 128, 384, 512):
        multiple = ip.padding_multiple(seq, use_xla=True)
        lengths = {
            min(-(-n // multiple) * multiple, seq) for n in range(seq + 1)
        }
        assert len(lengths - {0}) <= ip.XLA_PADDING_BUCKETS, (seq, lengths)


def _numbered_records(path, file_index, count=40):
    """Records whose first input id names them: 1000 * file + record."""
    with tf.io.TFRecordWriter(str(path)) as writer:
        for i in range(count):
            features = _pretraining_features()
            features["input_ids"] = ip.int_feature(
                [1000 * file_index + i] + [5] * 7
            )
            writer.write(ip.serialize_example(features))
    return str(path)


def _order(files, seed, batches=10, start_batch=0):
    d = ip.pretraining_dataset(
        files, 8, 8, 3, True, seed=seed, start_batch=start_batch
    )
    return [
        int(row[0])
        for batch in d.take(batches)
        for row in batch["input_ids"].numpy()
    ]


def test_pretraining_training_order_is_shuffled_by_the_seed(tmp_path):
    """Training reads records shuffled (not in file order; a buffer of 100
    after interleaving the shuffled, repeated file list, as the original),
    in an order that is a function of the seed (resumable: start_batch
    skips into the same order)."""
    files = [_numbered_records(tmp_path / f"{i}.tfrecord", i) for i in (1, 2)]
    order = _order(files, seed=1)
    assert order == _order(files, seed=1)
    assert order != _order(files, seed=2)
    assert _order(files, seed=1, batches=7, start_batch=3) == order[24:]
    for f in (1, 2):
        # Within each file, not in its order.
        ours = [n for n in order if n // 1000 == f][:20]
        assert ours != sorted(ours)
