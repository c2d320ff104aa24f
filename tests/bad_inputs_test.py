"""Bad inputs and faults: each fails with a message naming the file, line or
flag (and what to set), or recovers, before any work is wasted."""

import contextlib
import gzip
import json
import os
import subprocess

import numpy as np
import pytest
import tensorflow as tf
import training_helpers as helpers

from modeling import checkpoints
from modeling import config as config_lib
from modeling import convert
from modeling import errors
from modeling.data import input_pipeline
from modeling.tasks import extract
from modeling.tasks import pretraining
from modeling.training import checkpoint_manager
from modeling.training import trainer as trainer_lib


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    root = tmp_path_factory.mktemp("bad_inputs")
    return helpers.write_records(root / "good.tfrecord", num_records=20)


def _check(path, seq=helpers.SEQ, pred=helpers.PRED, vocab=helpers.VOCAB):
    return input_pipeline.check_pretraining_records(
        [str(path)], seq, pred, vocab
    )


def test_good_records_pass(records):
    assert _check(records) == [records]


def test_truncated_file_is_named(records, tmp_path):
    path = tmp_path / "cut.tfrecord"
    data = open(records, "rb").read()
    path.write_bytes(data[: len(data) - 50])
    with pytest.raises(errors.UserError, match=f"{path} is truncated"):
        _check(path)


def test_flipped_bytes_are_named(records, tmp_path):
    path = tmp_path / "flipped.tfrecord"
    data = bytearray(open(records, "rb").read())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(errors.UserError, match=f"{path} is not a TFRecord"):
        _check(path)


def test_damage_found_during_training_is_named(records, tmp_path):
    """Past the records checked up front, TensorFlow's "corrupted record"
    (which names no file) is traced back to the file."""
    path = tmp_path / "flipped.tfrecord"
    data = bytearray(open(records, "rb").read())
    data[-10] ^= 0xFF
    path.write_bytes(bytes(data))
    with (
        pytest.raises(errors.UserError, match=f"{path} is not a TFRecord"),
        pretraining._naming_damaged_files([records, str(path)]),
    ):
        for _ in tf.data.TFRecordDataset(str(path)):
            pass


def test_a_later_record_unlike_the_first_is_one_line(records, tmp_path):
    path = tmp_path / "mixed.tfrecord"
    with tf.io.TFRecordWriter(str(path)) as writer:
        writer.write(_record(helpers.SEQ))
        writer.write(_record(2 * helpers.SEQ))
    spec = input_pipeline.pretraining_feature_spec(helpers.SEQ, helpers.PRED)
    with (
        pytest.raises(errors.UserError, match="not a pre-training record of"),
        pretraining._naming_damaged_files([str(path)]),
    ):
        for record in tf.data.TFRecordDataset(str(path)):
            input_pipeline.decode_record(record, spec)


def _record(seq_length, weights=True, token=1):
    example = tf.train.Example()
    feature = example.features.feature
    for name in input_pipeline.PRETRAINING_SEQ_FEATURES:
        feature[name].int64_list.value.extend([token] * seq_length)
    for name in input_pipeline.PRETRAINING_PRED_INT_FEATURES:
        feature[name].int64_list.value.extend([1] * helpers.PRED)
    if weights:
        feature["masked_lm_weights"].float_list.value.extend(
            [1.0] * helpers.PRED
        )
    feature[input_pipeline.NEXT_SENTENCE_LABELS].int64_list.value.append(0)
    return example.SerializeToString()


def _run_reader(files, vocab=helpers.VOCAB):
    """The run's reader of these records under the run's guard, in a
    tf.function as the training step reads them (TensorFlow's message is
    then only "Graph execution error:" on its first line)."""
    files = [str(f) for f in files]
    dataset = input_pipeline.pretraining_dataset(
        files, 2, helpers.SEQ, helpers.PRED, False, vocab_size=vocab
    )
    iterator = iter(dataset)

    @tf.function
    def step():
        return next(iterator)["input_ids"][0, 0]

    with pretraining._naming_damaged_files(
        files,
        lambda: input_pipeline.find_bad_pretraining_record(
            files, helpers.SEQ, helpers.PRED, vocab
        ),
    ):
        for _ in range(200):
            step()


@pytest.mark.parametrize(
    "bad,message",
    [
        (
            _record(2 * helpers.SEQ),
            f"Record 150 of .* has {2 * helpers.SEQ} values of input_ids, not "
            f"--max_seq_length={helpers.SEQ}",
        ),
        (
            _record(helpers.SEQ, weights=False),
            "record 150 lacks masked_lm_weights",
        ),
        (
            _record(helpers.SEQ, token=-1),
            "Record 150 of .* has input_ids -1, but",
        ),
        (
            _record(helpers.SEQ, token=60),
            "Record 150 of .* has input_ids 60, but the BERT config's "
            "vocab_size is 50",
        ),
    ],
)
def test_a_bad_record_past_the_checked_ones_is_named(tmp_path, bad, message):
    """Past the first records (checked before the run), a record TensorFlow
    refuses mid-run is found and named: not a traceback, and not an id past
    the embedding table (a GPU's lookup returns zeros for it)."""
    path = tmp_path / "mixed.tfrecord"
    with tf.io.TFRecordWriter(str(path)) as writer:
        for number in range(200):
            writer.write(bad if number == 150 else _record(helpers.SEQ))
    assert _check(path, vocab=50) == [str(path)]
    with pytest.raises(errors.UserError, match=message + ".*re-run: a run"):
        _run_reader([path], vocab=50)


def test_the_search_for_a_bad_record_is_bounded(tmp_path, monkeypatch):
    """A corpus of hours of Python parsing is not read through: after
    FIND_SECONDS TensorFlow's own line is given, with what was read."""
    path = tmp_path / "mixed.tfrecord"
    with tf.io.TFRecordWriter(str(path)) as writer:
        for number in range(200):
            seq = 2 * helpers.SEQ if number == 150 else helpers.SEQ
            writer.write(_record(seq))
    monkeypatch.setattr(input_pipeline, "FIND_SECONDS", 0)
    with pytest.raises(
        errors.UserError,
        match="not a pre-training record of these flags .*Can't parse "
        "serialized Example.*the first 0 records of the inputs read fine",
    ):
        _run_reader([path], vocab=50)


def test_records_that_are_not_examples_are_named(tmp_path):
    path = tmp_path / "text.tfrecord"
    with tf.io.TFRecordWriter(str(path)) as writer:
        writer.write(b"hello world")
    with pytest.raises(errors.UserError, match="not a tf.train.Example"):
        _check(path)


def test_text_file_is_not_a_tfrecord(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_text("This is text, not records.\n" * 10)
    with pytest.raises(
        errors.UserError,
        match=f"{path} is not a TFRecord.*starts with text .*--input_format=text",
    ):
        _check(path)
    gzipped = tmp_path / "records.tfrecord.gz"
    gzipped.write_bytes(gzip.compress(b"x" * 100))
    with pytest.raises(errors.UserError, match="gzip-compressed"):
        _check(gzipped)


def test_sequence_lengths_differing_from_the_flags_say_what_to_set(records):
    with pytest.raises(
        errors.UserError,
        match=r"made with --max_seq_length=16 .*set --max_seq_length=16",
    ):
        _check(records, seq=128)
    with pytest.raises(
        errors.UserError, match=r"set --max_predictions_per_seq=4"
    ):
        _check(records, pred=20)


def test_every_file_is_checked_not_only_the_first(records, tmp_path):
    """A glob over two generations of records, or records without a
    feature: named up front, not a traceback from TensorFlow mid-run."""
    cases = (
        (
            _record(2 * helpers.SEQ),
            f"made with --max_seq_length={2 * helpers.SEQ}",
        ),
        (_record(helpers.SEQ, weights=False), "lacks masked_lm_weights"),
    )
    for number, (record, message) in enumerate(cases):
        other = tmp_path / f"{number}.tfrecord"
        with tf.io.TFRecordWriter(str(other)) as writer:
            writer.write(record)
        with pytest.raises(errors.UserError, match=f"{other}.* {message}"):
            input_pipeline.check_pretraining_records(
                [records, str(other)], helpers.SEQ, helpers.PRED, helpers.VOCAB
            )


def test_token_ids_beyond_vocab_size_are_caught_up_front(records):
    with pytest.raises(errors.UserError, match=r"vocab_size is 50"):
        _check(records, vocab=50)


def test_some_empty_files_are_skipped_with_a_warning(records, tmp_path, caplog):
    empty = tmp_path / "empty.tfrecord"
    empty.write_bytes(b"")
    with caplog.at_level("WARNING"):
        files = input_pipeline.check_record_files([str(empty), records])
    assert files == [records]
    assert f"Skipping 1 empty input file(s): {empty}" in caplog.text


def test_checkpoints_of_another_config_say_so(records, tmp_path):
    small = config_lib.BertConfig.from_json_file(
        helpers.tiny_config(tmp_path / "small.json")
    )
    wide = config_lib.BertConfig.from_dict(
        dict(small.to_dict(), intermediate_size=small.intermediate_size + 3)
    )
    out = tmp_path / "out"

    def trainer(config):
        run_config = trainer_lib.RunConfig(
            str(out), num_train_steps=1, handle_sigterm=False
        )
        return trainer_lib.Trainer(pretraining.make_task(config), run_config)

    dataset_fn = lambda start: input_pipeline.pretraining_dataset(  # noqa: E731
        [records], 4, helpers.SEQ, helpers.PRED, True, start_batch=start
    )
    trainer(small).train(dataset_fn)
    with pytest.raises(
        checkpoint_manager.ConfigMismatchError,
        match=r"made with another bert_config .*intermediate/dense/kernel has "
        r"shape \[32, 37\] there and \[32, 40\]",
    ):
        trainer(wide).train(dataset_fn)


def test_fine_tuning_into_a_pretraining_folder_names_the_mistake(tmp_path):
    """run_classifier with --output_dir the pre-training run's and
    --init_checkpoint one of its checkpoints (a common first try): its
    checkpoints are another task's, and the message says so (it blamed the
    bert_config, advising another one)."""
    from constants import REPO_ROOT
    from constants import TINY_VOCAB

    from modeling.tasks import classifier as classifier_lib

    records = helpers.write_records(tmp_path / "data.tfrecord")
    config_file = helpers.tiny_config(tmp_path / "bert_config.json")
    config = config_lib.BertConfig.from_json_file(config_file)
    out = tmp_path / "out"
    run_config = trainer_lib.RunConfig(
        str(out), num_train_steps=1, handle_sigterm=False
    )
    trainer_lib.Trainer(pretraining.make_task(config), run_config).train(
        lambda start: input_pipeline.pretraining_dataset(
            [records], 4, helpers.SEQ, helpers.PRED, True, start_batch=start
        )
    )
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(TINY_VOCAB) + "\n")
    settings = classifier_lib.Settings(
        task_name="MRPC",
        data_dir=str(REPO_ROOT / "tests" / "testdata" / "cls_mrpc"),
        vocab_file=str(vocab),
        bert_config_file=config_file,
        init_checkpoint=str(out / "model.ckpt-1"),
        output_dir=str(out),
        do_train=True,
        max_seq_length=helpers.SEQ,
        train_batch_size=4,
    )
    with pytest.raises(
        checkpoint_manager.ConfigMismatchError,
        match=r"are another task's .* no output_bias, a head of this run's "
        r"model\. Write this run to another --output_dir",
    ):
        classifier_lib.run(settings)


def test_config_missing_keys_warns_naming_each(tmp_path, caplog):
    path = tmp_path / "bert_config.json"
    path.write_text(json.dumps({"vocab_size": 10, "hidden_size": 8}))
    with pytest.raises(
        ValueError,
        match="num_attention_heads is not in the file, so it is the default 12",
    ):
        config_lib.BertConfig.from_json_file(str(path))
    path.write_text(json.dumps({"vocab_size": 10, "hidden_size": 24}))
    with caplog.at_level("WARNING"):
        config = config_lib.BertConfig.from_json_file(str(path))
    assert config.num_hidden_layers == 12  # The original's default, kept.
    assert f"{path} has no 'num_hidden_layers': using the default 12" in (
        caplog.text
    )
    assert "'num_attention_heads'" in caplog.text
    assert "'hidden_size'" not in caplog.text


# === extract_features ===


@pytest.fixture
def extract_inputs(tmp_path):
    config = helpers.tiny_config(tmp_path / "bert_config.json")
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\na\n")
    # No checkpoint: a test that gets past the checks fails on loading it.
    return {
        "bert_config_file": config,
        "vocab_file": str(vocab),
        "init_checkpoint": str(tmp_path / "none" / "bert_model.ckpt"),
        "max_seq_length": 16,
        "layers": "-1",
    }


def test_extract_non_utf8_names_file_and_line(tmp_path, extract_inputs):
    text = tmp_path / "input.txt"
    text.write_bytes(b"the a\nthe \xff a\n")
    with pytest.raises(
        errors.UserError, match=f"{text} line 2: byte 0xff at column 5"
    ):
        extract.run_extraction(
            str(text), str(tmp_path / "out.jsonl"), **extract_inputs
        )


def test_extract_empty_input_writes_an_empty_file(tmp_path, extract_inputs):
    text = tmp_path / "input.txt"
    text.write_bytes(b"")
    out = tmp_path / "out.jsonl"
    assert extract.run_extraction(str(text), str(out), **extract_inputs) == 0
    assert out.read_bytes() == b""


def test_extract_missing_output_folder_fails_first(tmp_path, extract_inputs):
    text = tmp_path / "input.txt"
    text.write_text("the a\n")
    out = tmp_path / "missing" / "out.jsonl"
    with pytest.raises(FileNotFoundError, match=f"create {out.parent} first"):
        extract.run_extraction(str(text), str(out), **extract_inputs)


def test_extract_two_separators_warn(tmp_path, caplog):
    text = tmp_path / "input.txt"
    text.write_text("A ||| B ||| C\nD ||| E\n")
    with caplog.at_level("WARNING"):
        examples = extract.read_examples(str(text))
    assert (examples[0].text_a, examples[0].text_b) == ("A ||| B", "C")
    assert f"{text} line 1 has more than one ' ||| '" in caplog.text
    assert "line 2" not in caplog.text


# === convert and checkpoints on bad files and full disks ===


def _tiny_hf_folder(folder):
    """An HF folder with the tiny config: model.safetensors, config.json,
    vocab.txt (written by original_to_hf from random weights)."""
    config = config_lib.BertConfig.from_json_file(
        helpers.tiny_config(folder / "src_config.json")
    )
    original = folder / "original"
    original.mkdir()
    config.to_json_file(original / convert.BERT_CONFIG)
    (original / convert.VOCAB).write_text("x\n" * config.vocab_size)
    shapes = checkpoints.original_variable_shapes(config, False)
    rng = np.random.default_rng(0)
    arrays = {
        n: rng.normal(size=s).astype(np.float32) for n, s in shapes.items()
    }
    checkpoints.write_checkpoint(original / convert.CKPT_PREFIX, arrays)
    hf = folder / "hf"
    convert.original_to_hf(original, hf)
    return hf


def test_truncated_safetensors_is_named(tmp_path):
    hf = _tiny_hf_folder(tmp_path)
    weights = hf / convert.HF_WEIGHTS
    weights.write_bytes(weights.read_bytes()[:100])
    with pytest.raises(
        ValueError, match=f"{weights} is not a readable safetensors file"
    ):
        convert.hf_to_original(hf, tmp_path / "out")
    assert not (tmp_path / "out").exists()


@contextlib.contextmanager
def _small_disk(path, size="64k"):
    """A tiny tmpfs at `path` (root only); skips the test otherwise."""
    path.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
        capture_output=True,
        check=False,
    )
    if mounted.returncode:
        pytest.skip("cannot mount a small tmpfs to fill up")
    try:
        yield path
    finally:
        subprocess.run(["umount", str(path)], check=False)


def test_full_disk_leaves_nothing_half_built(tmp_path):
    hf = _tiny_hf_folder(tmp_path)
    with _small_disk(tmp_path / "disk") as disk:
        with pytest.raises(errors.UserError, match="No space left"):
            checkpoints.write_checkpoint(
                disk / "model.ckpt-1",
                {"big": np.zeros((100, 1000), np.float32)},
            )
        assert os.listdir(disk) == []
        # The tiny model's checkpoint (~100 kB) does not fit either.
        with pytest.raises(errors.UserError, match="No space left"):
            convert.hf_to_original(hf, disk / "converted")
        assert os.listdir(disk) == []


@pytest.mark.parametrize(
    "fields, message",
    [
        (
            {"iterations_per_loop": 0},
            "--iterations_per_loop=0: must be at least 1",
        ),
        ({"save_checkpoints_steps": None}, "--save_checkpoints_steps=None"),
        ({"save_checkpoints_secs": -5}, "--save_checkpoints_secs=-5: seconds"),
    ],
)
def test_run_config_values_the_original_refused(tmp_path, fields, message):
    """A negative --save_checkpoints_secs saved after every step; a zero
    --iterations_per_loop ran as 1, silently (the original's TPUConfig
    refused both)."""
    with pytest.raises(ValueError, match=message):
        trainer_lib.RunConfig(str(tmp_path), 10, **fields)


@pytest.mark.parametrize(
    "value, message",
    [
        ({"batch_size": 0}, "--batch_size=0: must be at least 1"),
        # The strategy's message named --tpu_name, a flag extract_features
        # has not (it refuses it as unknown).
        ({"use_tpu": True}, "--use_tpu needs --master"),
    ],
)
def test_extract_features_settings_are_checked_up_front(value, message):
    from modeling.tasks.settings import extract as extract_settings

    with pytest.raises(ValueError, match=message):
        extract_settings.Settings(
            input_file="i",
            output_file="o",
            bert_config_file="c",
            init_checkpoint="x",
            vocab_file="v",
            **value,
        )
