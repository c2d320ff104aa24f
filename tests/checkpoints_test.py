"""Tests of modeling.checkpoints against the original release's checkpoints."""

import errno
import os
import shutil

import numpy as np
import pytest
import script_runner
import tensorflow as tf

from modeling import checkpoints
from modeling import config as config_lib
from modeling import errors
from modeling import models


@pytest.fixture
def tiny_config(golden_dir):
    return config_lib.BertConfig.from_json_file(
        str(golden_dir / "tiny_init" / "bert_config.json")
    )


def test_pretrainer_names_and_shapes_equal_the_original(
    tiny_config, golden_dir
):
    model = models.BertPretrainer(tiny_config)
    ours = {
        (checkpoints.variable_name(v), tuple(v.shape)) for v in model.weights
    }
    theirs = set(
        checkpoints.checkpoint_shapes(golden_dir / "tiny_init").items()
    )
    assert ours == theirs
    assert len(ours) == len(model.weights)  # no name twice (tied decoder)
    table = checkpoints.original_variable_shapes(tiny_config)
    assert set(table.items()) == theirs
    encoder_only = checkpoints.original_variable_shapes(tiny_config, False)
    assert set(encoder_only) == {n for n in table if n.startswith("bert/")}


def test_load_reports_optimizer_state_as_normal_extras(tiny_config, golden_dir):
    model = models.BertPretrainer(tiny_config)
    report = checkpoints.load_weights(model, golden_dir / "tiny_after_3_steps")
    assert report.checkpoint.endswith("model.ckpt-3")
    assert len(report.restored) == len(model.weights)
    assert report.missing == []
    assert "global_step" in report.unused
    assert "bert/pooler/dense/kernel/adam_m" in report.unused
    assert report.unexpected == []
    expected = checkpoints.read_checkpoint(golden_dir / "tiny_after_3_steps")
    for v in model.weights:
        np.testing.assert_array_equal(
            v.numpy(), expected[checkpoints.variable_name(v)]
        )


def test_load_and_resave_keeps_everything(tiny_config, golden_dir, tmp_path):
    src = golden_dir / "tiny_after_3_steps"
    original = checkpoints.read_checkpoint(src)
    model = models.BertPretrainer(tiny_config)
    checkpoints.load_weights(model, src)
    arrays = {checkpoints.variable_name(v): v for v in model.weights}
    arrays["bert/pooler/dense/bias"] = tf.Variable(
        model.bert.pooler.dense.bias.numpy()
    )
    arrays.update({n: a for n, a in original.items() if "/adam_" in n})
    step = int(original["global_step"])
    prefix = checkpoints.write_checkpoint(
        str(tmp_path / f"model.ckpt-{step}"), arrays, global_step=step
    )
    again = checkpoints.read_checkpoint(tmp_path)
    assert checkpoints.resolve_checkpoint(tmp_path) == prefix
    assert sorted(again) == sorted(original)
    for name, value in original.items():
        assert again[name].dtype == value.dtype, name
        np.testing.assert_array_equal(again[name], value, err_msg=name)
    assert again["global_step"].dtype == np.int64 and again["global_step"] == 3
    state = (tmp_path / "checkpoint").read_text()
    assert state == (
        'model_checkpoint_path: "model.ckpt-3"\n'
        'all_model_checkpoint_paths: "model.ckpt-3"\n'
    )
    assert not [p for p in os.listdir(tmp_path) if ".tmp-" in p]


def _save_steps(folder, steps, keep_max):
    """model.ckpt-<step> for each step, as a training run saves them."""
    for step in steps:
        checkpoints.write_checkpoint(
            str(folder / f"model.ckpt-{step}"),
            {"w": np.full([2], step, np.float32)},
            global_step=step,
            keep_max=keep_max,
        )


def test_keep_max_deletes_the_oldest(tmp_path):
    _save_steps(tmp_path, range(1, 5), keep_max=2)
    state = tf.train.get_checkpoint_state(str(tmp_path))
    assert list(state.all_model_checkpoint_paths) == [
        str(tmp_path / "model.ckpt-3"),
        str(tmp_path / "model.ckpt-4"),
    ]
    assert sorted(os.listdir(tmp_path)) == [
        "checkpoint",
        "model.ckpt-3.data-00000-of-00001",
        "model.ckpt-3.index",
        "model.ckpt-4.data-00000-of-00001",
        "model.ckpt-4.index",
    ]
    np.testing.assert_array_equal(
        checkpoints.read_checkpoint(tmp_path)["w"], [4.0, 4.0]
    )
    # 0, as the original's RunConfig: every checkpoint is kept.
    _save_steps(tmp_path, range(5, 8), keep_max=0)
    state = tf.train.get_checkpoint_state(str(tmp_path))
    assert [os.path.basename(p) for p in state.all_model_checkpoint_paths] == [
        f"model.ckpt-{step}" for step in range(3, 8)
    ]
    assert len(os.listdir(tmp_path)) == 11


def test_pruning_spares_a_model_and_glob_characters(tmp_path):
    """Training into a folder holding bert_model.ckpt (written with a state
    file, as convert does) never prunes that model; a folder whose name
    holds glob characters is read and pruned as any other."""
    folder = tmp_path / "run[1]*"
    folder.mkdir()
    model = checkpoints.write_checkpoint(
        str(folder / "bert_model.ckpt"), {"w": np.zeros([2], np.float32)}
    )
    _save_steps(folder, range(1, 5), keep_max=2)
    assert sorted(os.listdir(folder)) == [
        "bert_model.ckpt.data-00000-of-00001",
        "bert_model.ckpt.index",
        "checkpoint",
        "model.ckpt-3.data-00000-of-00001",
        "model.ckpt-3.index",
        "model.ckpt-4.data-00000-of-00001",
        "model.ckpt-4.index",
    ]
    assert checkpoints.resolve_checkpoint(model) == model
    state = checkpoints.read_state(folder)
    assert [os.path.basename(p) for p in state.all_model_checkpoint_paths] == [
        "bert_model.ckpt",
        "model.ckpt-3",
        "model.ckpt-4",
    ]


def test_leftovers_of_an_interrupted_run_are_pruned(tmp_path):
    """A kill while pruning left files the state no longer lists, each as
    large as a checkpoint, forever: those older than every kept checkpoint
    go; a newer one, or another series, stays. Without a readable state
    (missing, damaged), nothing unlisted goes: the checkpoints on disk are
    what a resume falls back to."""

    def save(step):
        _save_steps(tmp_path, [step], keep_max=2)

    save(2)
    for name in (
        "model.ckpt-1.index",
        "model.ckpt-1.data-00000-of-00001",
        "model.ckpt-0.data-00000-of-00001",
        "model.ckpt-9.data-00000-of-00001",
        "other.ckpt-1.index",
    ):
        (tmp_path / name).write_bytes(b"x")
    (tmp_path / "checkpoint").write_bytes(b"")  # damaged: nothing goes
    save(3)
    assert (tmp_path / "model.ckpt-1.index").exists()
    save(4)  # The state (of 3) is read: 1 and 0 go, 2 is pruned.
    assert sorted(os.listdir(tmp_path)) == [
        "checkpoint",
        "model.ckpt-3.data-00000-of-00001",
        "model.ckpt-3.index",
        "model.ckpt-4.data-00000-of-00001",
        "model.ckpt-4.index",
        "model.ckpt-9.data-00000-of-00001",
        "other.ckpt-1.index",
    ]


def test_object_based_checkpoints_and_plain_tf_variables(tmp_path):
    """A TF2 object-based checkpoint is named as such (not "corrupt"); a
    plain tf.Variable loads (its dtype is a tf.DType)."""
    prefix = tf.train.Checkpoint(w=tf.Variable([1.0, 2.0])).write(
        str(tmp_path / "tf2" / "ckpt")
    )
    with pytest.raises(ValueError, match="is a TF2 object-based checkpoint"):
        checkpoints.read_checkpoint(prefix)
    saved = checkpoints.write_checkpoint(
        str(tmp_path / "v1" / "model.ckpt"),
        {"bert/w": np.array([3.0, 4.0], np.float32)},
    )
    variable = tf.Variable([0.0, 0.0], name="bert/w")
    checkpoints.load_weights([variable], saved)
    np.testing.assert_array_equal(variable.numpy(), [3.0, 4.0])


def test_resolve_accepts_prefix_file_and_directory(golden_dir, tmp_path):
    init = golden_dir / "tiny_init"
    prefix = str(init / "bert_model.ckpt")
    assert checkpoints.resolve_checkpoint(init) == prefix
    assert checkpoints.resolve_checkpoint(prefix) == prefix
    assert checkpoints.resolve_checkpoint(prefix + ".index") == prefix
    # A released folder without a `checkpoint` state file.
    for f in init.glob("bert_model.ckpt.*"):
        shutil.copy(f, tmp_path)
    assert checkpoints.resolve_checkpoint(tmp_path) == str(
        tmp_path / "bert_model.ckpt"
    )
    # A state file with an absolute path from another machine (old Savers).
    (tmp_path / "checkpoint").write_text(
        'model_checkpoint_path: "/elsewhere/bert_model.ckpt"\n'
    )
    assert checkpoints.resolve_checkpoint(tmp_path) == str(
        tmp_path / "bert_model.ckpt"
    )
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="empty/bert_model.ckpt.index"):
        checkpoints.resolve_checkpoint(tmp_path / "empty")
    with pytest.raises(FileNotFoundError, match="nothere.index does not exist"):
        checkpoints.resolve_checkpoint(tmp_path / "nothere")


def test_truncated_checkpoint_is_a_clear_error(
    tiny_config, golden_dir, tmp_path
):
    for f in (golden_dir / "tiny_init").glob("bert_model.ckpt.*"):
        shutil.copy(f, tmp_path)
    data = tmp_path / "bert_model.ckpt.data-00000-of-00001"
    data.write_bytes(data.read_bytes()[:1000])
    model = models.BertPretrainer(tiny_config)
    with pytest.raises(ValueError, match="is unreadable: reading '.*' failed"):
        checkpoints.load_weights(model, tmp_path)
    with pytest.raises(ValueError, match="truncated or corrupt data file"):
        checkpoints.read_checkpoint(tmp_path)
    (tmp_path / "bert_model.ckpt.index").write_bytes(b"garbage")
    with pytest.raises(ValueError, match="bert_model.ckpt is unreadable"):
        checkpoints.read_checkpoint(tmp_path)


def test_wrong_shape_names_variable_and_shapes(
    tiny_config, golden_dir, tmp_path
):
    arrays = checkpoints.read_checkpoint(golden_dir / "tiny_init")
    arrays["cls/predictions/output_bias"] = np.zeros([98], np.float32)
    checkpoints.write_checkpoint(str(tmp_path / "bert_model.ckpt"), arrays)
    model = models.BertPretrainer(tiny_config)
    with pytest.raises(ValueError) as info:
        checkpoints.load_weights(model, tmp_path)
    assert str(info.value).startswith(
        "Shape mismatch for variable cls/predictions/output_bias: the model "
        f"has [99] but checkpoint {tmp_path}/bert_model.ckpt has [98]."
    )


def test_config_that_does_not_match(tiny_config_dict, golden_dir):
    config = config_lib.BertConfig.from_dict(
        dict(tiny_config_dict, hidden_size=64)
    )
    model = models.BertPretrainer(config)
    with pytest.raises(ValueError) as info:
        checkpoints.load_weights(model, golden_dir / "tiny_init")
    message = str(info.value)
    assert message.startswith(
        "Shape mismatch for variable bert/embeddings/word_embeddings: the "
        "model has [99, 64] but checkpoint"
    )
    assert "more). Does bert_config.json match the checkpoint?" in message
    # Nothing was assigned: the check runs before any assignment.
    assert model.bert.embeddings.word_embeddings.shape == (99, 64)


def test_missing_variables_error_unless_ignored(
    tiny_config, golden_dir, caplog
):
    model = models.BertClassifier(tiny_config, num_labels=3)
    with pytest.raises(ValueError, match="lacks 2 variable.*output_weights"):
        checkpoints.load_weights(model, golden_dir / "tiny_init")
    with caplog.at_level("INFO"):
        report = checkpoints.load_weights(
            model, golden_dir / "tiny_init", ignore_missing=[r"^output_"]
        )
    assert report.missing == ["output_weights", "output_bias"]
    assert "cls/predictions/output_bias" in report.unexpected
    # The original's listing of what came from the checkpoint.
    assert "**** Trainable Variables ****" in caplog.text
    assert (
        "  name = bert/embeddings/word_embeddings:0, shape = (99, 32), "
        "*INIT_FROM_CKPT*\n" in caplog.text
    )
    assert "  name = output_weights:0, shape = (3, 32)\n" in caplog.text


def test_a_failed_write_leaves_no_temporary_files(tmp_path, monkeypatch):
    def fail(temp, final):
        raise OSError("rename failed")

    monkeypatch.setattr(checkpoints.file_io, "publish", fail)
    with pytest.raises(OSError, match="rename failed"):
        checkpoints.write_checkpoint(
            str(tmp_path / "model.ckpt-1"), {"a": np.zeros(2, np.float32)}
        )
    assert os.listdir(tmp_path) == []


def test_state_file_is_read_as_tensorflow_reads_it(tmp_path):
    tf_written = tmp_path / "tf"
    tf_written.mkdir()
    name = 'model "q" \\ é.ckpt-2'
    tf.compat.v1.train.update_checkpoint_state(
        str(tf_written),
        name,
        all_model_checkpoint_paths=["/abs/model.ckpt-1", name],
        all_model_checkpoint_timestamps=[1.5, 2.25],
        last_preserved_timestamp=1.0,
    )
    # A C++ Saver's escapes: octal bytes of UTF-8, \" and \\.
    escaped = tmp_path / "escaped"
    escaped.mkdir()
    (escaped / "checkpoint").write_text(
        'model_checkpoint_path: "m\\303\\251 \\"x\\"\\\\.ckpt"\n'
        'all_model_checkpoint_paths: "m\\303\\251 \\"x\\"\\\\.ckpt"\n'
    )
    for folder in (tf_written, escaped):
        ours = checkpoints.read_state(folder)
        theirs = tf.train.get_checkpoint_state(str(folder))
        assert ours.model_checkpoint_path == theirs.model_checkpoint_path
        assert ours.all_model_checkpoint_paths == list(
            theirs.all_model_checkpoint_paths
        )
    assert checkpoints.read_state(escaped).model_checkpoint_path == str(
        escaped / 'mé "x"\\.ckpt'
    )
    (escaped / "checkpoint").write_text("not a state file\n")
    assert checkpoints.read_state(escaped) is None
    assert tf.train.get_checkpoint_state(str(escaped)) is None
    assert checkpoints.read_state(tmp_path / "nothing") is None


def test_a_full_disk_is_one_user_error(tmp_path, monkeypatch):
    checkpoints.write_checkpoint(
        str(tmp_path / "model.ckpt-1"), {"a": np.zeros(2, np.float32)}
    )
    before = script_runner.folder_digests(tmp_path)

    def full(temp, final):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(checkpoints.file_io, "publish", full)
    with pytest.raises(errors.UserError) as info:
        checkpoints.write_checkpoint(
            str(tmp_path / "model.ckpt-2"), {"a": np.ones(2, np.float32)}
        )
    assert str(info.value) == (
        f"No space left on the device of {tmp_path} to write the checkpoint "
        f"{tmp_path}/model.ckpt-2 (nothing partial was left): free some "
        "space and re-run"
    )
    assert script_runner.folder_digests(tmp_path) == before


def test_a_folder_of_links_to_another_runs_files_stays_apart(tmp_path):
    """A run continued in a folder of links to an earlier run's files (`ln
    -s ../pre/* run2/`): its checkpoints and state file replace the links,
    as the original's Saver did, and the earlier run's folder is unchanged
    (its `checkpoint` file listed checkpoints it did not hold)."""
    pre, run2 = tmp_path / "pre", tmp_path / "run2"
    pre.mkdir()
    run2.mkdir()
    weights = {"w": np.ones(3, np.float32)}
    checkpoints.write_checkpoint(str(pre / "model.ckpt-10"), weights)
    before = script_runner.folder_digests(pre)
    for name in os.listdir(pre):
        (run2 / name).symlink_to(pre / name)
    checkpoints.write_checkpoint(
        str(run2 / "model.ckpt-20"), weights, keep_max=1
    )
    assert script_runner.folder_digests(pre) == before
    assert not (run2 / "checkpoint").is_symlink()
    assert "model.ckpt-20" in (run2 / "checkpoint").read_text()
