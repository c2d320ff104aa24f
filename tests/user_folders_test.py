"""A user's folders are never deleted (modeling/export/folders.py): an
export replaces only an earlier export of this repository or an empty
folder, --export_dir and --output_dir must lie apart, and an --output_dir
that is a file is refused; every refusal is one message naming the flag and
the folder, before any training, with every file of the user's folders
byte-for-byte unchanged."""

import json
import os
import subprocess

import hub_helpers
import pytest
import script_runner
import tensorflow as tf

from modeling import convert
from modeling import errors
from modeling.data import file_io
from modeling.data import tfrecord_io
from modeling.export import base
from modeling.export import folders
from modeling.pretraining_data import records
from modeling.tasks import classifier
from modeling.tasks import embeddings
from modeling.tasks import export_hub
from modeling.tasks import multiple_choice
from modeling.tasks import ner
from modeling.tasks import pretraining
from modeling.tasks import squad

# What the refusals raise (both one line, exit status 1 from a script).
REFUSED = (errors.UserError, NotADirectoryError)


class _Server(tf.Module):
    """The smallest model save_export can write: x -> 2x."""

    @tf.function(input_signature=[tf.TensorSpec([None], tf.float32)])
    def double(self, x):
        return {"y": 2 * x}


def _export(path, info, files=None):
    """A real export through base.save_export (what every script's
    --export_dir and export_for_serving call)."""
    server = _Server()
    signatures = {"serving_default": server.double.get_concrete_function()}
    extra = None if files is None else (files, None)
    return base.save_export(server, str(path), signatures, info, extra)


def _info(path):
    return json.loads(
        (path / folders.EXTRA_ASSETS / folders.EXPORT_INFO_FILE).read_text()
    )


def _user_folder(path):
    """A folder of a user's files, a subfolder included."""
    (path / "data").mkdir(parents=True)
    (path / "notes.txt").write_text("my notes\n")
    (path / "data" / "train.tsv").write_text("a\tb\n")
    return path


def _no_temporaries(folder):
    return not [p for p in folder.iterdir() if ".tmp-" in p.name]


# === The export itself (base.save_export, folders.publishing) ===


def test_an_export_replaces_an_earlier_export(tmp_path):
    out = tmp_path / "export"
    # The first with the files an export may add (named in its record).
    _export(
        out,
        {"task": "first", "vocab_file": "vocab.txt", "tflite": {"file": "m"}},
        {"vocab.txt": b"[PAD]\n", "m": b"lite"},
    )
    assert (out / "m").exists() and (out / "vocab.txt").exists()
    _export(out, {"task": "second"})
    assert _info(out) == {"task": "second"}
    assert not (out / "m").exists() and not (out / "vocab.txt").exists()
    assert _no_temporaries(tmp_path)


def test_an_export_fills_an_empty_folder(tmp_path):
    out = tmp_path / "export"
    out.mkdir()
    _export(out, {"task": "t"})
    assert _info(out) == {"task": "t"}


def test_a_user_file_beside_an_earlier_export_is_refused(tmp_path):
    out = tmp_path / "export"
    _export(out, {"task": "old"})
    (out / "notes.txt").write_text("mine")
    before = script_runner.folder_digests(out)
    with pytest.raises(errors.UserError) as e:
        _export(out, {"task": "new"})
    message = str(e.value)
    assert f"{out} holds files that no export writes (notes.txt)" in message
    assert "\n" not in message
    assert script_runner.folder_digests(out) == before
    assert _no_temporaries(tmp_path)


@pytest.mark.parametrize("kind", ["user folder", "file"])
def test_a_folder_of_user_files_or_a_file_is_refused(tmp_path, kind):
    user = _user_folder(tmp_path / "mine")
    out = user if kind == "user folder" else user / "notes.txt"
    before = script_runner.folder_digests(user)
    with pytest.raises(REFUSED) as e:
        _export(out, {"task": "t"})
    want = (
        "is not an export of this repository (it holds data, notes.txt)"
        if kind == "user folder"
        else "is a file, not a folder"
    )
    assert str(e.value).startswith(f"{out} {want}")
    assert script_runner.folder_digests(user) == before
    assert _no_temporaries(tmp_path)


def test_the_current_folder_is_refused_before_the_export(tmp_path, monkeypatch):
    """--export_dir=. (or a folder holding the working directory): refused
    before anything is written, naming the flag (it failed after the
    export, naming its own temporary folder)."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    for given in (".", str(work), str(tmp_path), "./"):
        with pytest.raises(errors.UserError, match="is the current folder"):
            folders.check_replaceable(given, "export_dir")
    _export(work / "export", {"task": "t"})  # A folder inside it is fine.
    assert _info(work / "export") == {"task": "t"}
    assert sorted(p.name for p in work.iterdir()) == ["export"]


def test_a_mount_point_is_refused_before_the_export(tmp_path, monkeypatch):
    """An empty mount point (a Docker volume) passed the check, then the
    export failed after the whole run: it cannot be renamed aside."""
    mount = tmp_path / "volume"
    mount.mkdir()
    real = os.path.ismount
    monkeypatch.setattr(
        os.path, "ismount", lambda p: os.fspath(p) == str(mount) or real(p)
    )
    with pytest.raises(errors.UserError, match="is a mount point"):
        folders.check_replaceable(str(mount), "export_dir")
    folders.check_replaceable(str(mount / "export"), "export_dir")


def test_a_folder_named_like_a_temporary_is_replaced_cleanly(tmp_path):
    """An export folder whose name holds ".tmp-": its earlier export's
    hidden name keeps the writer's tag last, and goes."""
    out = tmp_path / "model.tmp-1"
    _export(out, {"task": "old"})
    _export(out, {"task": "new"})
    assert _info(out) == {"task": "new"}
    assert _leftovers(tmp_path) == []


def test_a_link_is_published_into_its_target(tmp_path):
    """The link stays a link: the export replaces the folder it names."""
    target = tmp_path / "real"
    _export(target, {"task": "old"})
    link = tmp_path / "link"
    link.symlink_to(target)
    _export(link, {"task": "new"})
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert _info(target) == {"task": "new"}
    # A link to a user's folder is refused like the folder.
    user = _user_folder(tmp_path / "mine")
    before = script_runner.folder_digests(user)
    link.unlink()
    link.symlink_to(user)
    with pytest.raises(errors.UserError, match=f"{link} \\(a link to {user}"):
        _export(link, {"task": "t"})
    assert script_runner.folder_digests(user) == before
    assert link.is_symlink() and _no_temporaries(tmp_path)


def test_a_file_added_during_the_export_is_refused_at_publish(tmp_path):
    """Checked again just before the earlier export goes."""
    out = tmp_path / "export"
    _export(out, {"task": "old"})
    with (
        pytest.raises(errors.UserError, match="late.txt"),
        folders.publishing(out) as tmp,
    ):
        os.mkdir(tmp)
        (out / "late.txt").write_text("written while the run trained")
    assert (out / "late.txt").read_text().startswith("written")
    assert _info(out) == {"task": "old"}
    assert _no_temporaries(tmp_path)


def _leftovers(folder):
    return [p.name for p in folder.iterdir() if p.name.startswith(".")]


def test_the_earlier_export_goes_only_once_the_new_one_is_in_place(
    tmp_path, monkeypatch
):
    """A failed rename of the new export puts the earlier one back; the
    earlier one is removed after the new one took its name, with SIGTERM
    held, and a failure to remove it leaves the new one in place. (The
    earlier export was removed first: a SIGTERM then lost both.)"""
    out = tmp_path / "export"
    _export(out, {"task": "old"})
    publish = file_io.publish

    def failing(temp, final):  # The new export's rename into place.
        if os.fspath(final) == str(out) and ".tmp-" in os.fspath(temp):
            raise OSError("rename failed")
        publish(temp, final)

    monkeypatch.setattr(file_io, "publish", failing)
    with pytest.raises(OSError, match="rename failed"):
        _export(out, {"task": "new"})
    assert _info(out) == {"task": "old"}
    assert _leftovers(tmp_path) == []
    monkeypatch.setattr(file_io, "publish", publish)

    remove = file_io.remove_if_exists
    held = []

    def failing_removal(path):
        if ".replaced-" in os.path.basename(os.fspath(path)):
            held.append(errors._DEFERRAL["depth"])  # SIGTERM held?
            raise OSError("busy")
        remove(path)

    monkeypatch.setattr(file_io, "remove_if_exists", failing_removal)
    _export(out, {"task": "new"})  # A warning: the new one is in place.
    monkeypatch.setattr(file_io, "remove_if_exists", remove)
    assert held == [1]
    assert _info(out) == {"task": "new"}
    # The earlier export, under its hidden name: never a temporary's.
    (alive,) = _leftovers(tmp_path)
    assert alive.startswith(".export.replaced-")
    # A later export removes such leftovers of killed runs (their process
    # gone from this host), not those of live ones.
    gone = subprocess.Popen(["true"])
    gone.wait()
    tag = file_io.temp_name(out).rsplit("-", 1)[1]
    killed = tmp_path / f".export.replaced-{gone.pid}-{tag}"
    killed.mkdir()
    _export(out, {"task": "third"})
    assert _info(out) == {"task": "third"}
    assert _leftovers(tmp_path) == [alive]


def test_the_new_export_is_on_the_disk_before_the_earlier_one_goes(
    tmp_path, disk_events
):
    """Every file of the new export is synced before the earlier export is
    renamed aside, and the folder's renames before it is removed: a power
    cut cannot leave an empty export where a whole one was."""
    out = tmp_path.resolve() / "export"
    _export(out, {"task": "old"})
    disk_events.clear()
    _export(out, {"task": "new"})
    assert _info(out) == {"task": "new"}
    renames = [e for e in disk_events if e[0] == "rename"]
    aside, new = [e for e in renames if str(out) in (e[1], e[2])]
    assert aside[1] == str(out) and ".replaced-" in aside[2]
    assert new[2] == str(out)
    files = [
        os.path.relpath(os.path.join(folder, name), out)
        for folder, _, names in os.walk(out)
        for name in names
    ]
    assert "saved_model.pb" in files and len(files) >= 4
    synced = {e[1] for e in disk_events[: disk_events.index(aside)]}
    assert {os.path.join(new[1], f) for f in files} <= synced
    (removal,) = [e for e in disk_events if e == ("remove", aside[2])]
    between = disk_events[disk_events.index(new) : disk_events.index(removal)]
    assert ("sync", str(tmp_path.resolve())) in between


def _saved_model_pb(assets):
    """A saved_model.pb whose MetaGraphDef tracks `assets` (AssetFileDef
    file names): all export/folders.py reads of it."""
    from modeling import tensor_bundle as tb

    meta = b"".join(
        tb._message_field(6, tb._message_field(2, name.encode()))
        for name in assets
    )
    return tb._message_field(2, meta)


def _files(root, names):
    for name in names:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        if name.endswith("saved_model.pb"):
            (root / name).write_bytes(_saved_model_pb(["vocab.txt"]))
        else:
            (root / name).write_text("x")
    return root


@pytest.mark.parametrize(
    "names, foreign",
    [
        # export_hub --export_type=both, marked (this version).
        (
            [
                "encoder/saved_model.pb",
                "encoder/variables/variables.index",
                "encoder/variables/variables.data-00000-of-00001",
                "encoder/assets/vocab.txt",
                "encoder/assets.extra/bert_config.json",
                "encoder/assets.extra/bert_hub_export.json",
                "preprocessing/saved_model.pb",
                "preprocessing/assets.extra/bert_hub_export.json",
            ],
            [],
        ),
        # An encoder exported before the mark: its bert_config.json.
        (["saved_model.pb", "assets.extra/bert_config.json"], []),
        # A user's file inside a part of "both".
        (
            [
                "encoder/assets.extra/bert_hub_export.json",
                "encoder/notes.txt",
                "preprocessing/assets.extra/bert_hub_export.json",
            ],
            ["encoder/notes.txt"],
        ),
        # A SavedModel this repository did not write.
        (
            ["saved_model.pb", "variables/variables.index"],
            ["saved_model.pb", "variables"],
        ),
        # Files hidden in an export's folders.
        (
            [
                "saved_model.pb",
                "assets.extra/bert_hub_export.json",
                "assets.extra/mine.json",
                "variables/mine.bin",
                "assets/sub/mine.txt",
            ],
            ["assets/sub", "assets.extra/mine.json", "variables/mine.bin"],
        ),
        # A file beside the vocabulary the SavedModel tracks in assets/.
        (
            [
                "saved_model.pb",
                "assets.extra/bert_hub_export.json",
                "assets/vocab.txt",
                "assets/notes.txt",
            ],
            ["assets/notes.txt"],
        ),
    ],
)
def test_what_counts_as_an_export(tmp_path, names, foreign):
    assert folders.foreign_entries(_files(tmp_path, names)) == foreign


def test_overlap_is_by_folder_not_by_name_prefix(tmp_path):
    run = str(tmp_path / "run")
    assert file_io.overlap(run, f"{run}/")
    assert file_io.overlap(run, f"{run}/export")
    assert file_io.overlap(f"{run}/export/..", run)
    assert not file_io.overlap(run, f"{run}_export")
    assert not file_io.overlap("gs://b/run", "gs://b/run_export")
    assert file_io.overlap("gs://b/run/", "gs://b/run/export")


def test_an_export_holding_what_the_run_reads_is_refused(tmp_path):
    """An encoder fine-tuned from an earlier export's folder
    (--bert_hub_module_handle), a checkpoint, a data file: exporting over
    the folder that holds it would delete it (the earlier export passed as
    replaceable, and was). An input beside the export folder is fine."""
    import types

    from modeling.tasks import common

    hub = tmp_path / "hub"
    (hub / "encoder").mkdir(parents=True)
    for flag, value in (
        ("bert_hub_module_handle", hub / "encoder"),
        ("bert_hub_module_handle", hub),
        ("init_checkpoint", hub / "encoder" / "model.ckpt-3"),
        ("input_file", f"{tmp_path}/a.tfrecord,{hub}/b.tfrecord"),
    ):
        settings = types.SimpleNamespace(
            export_dir=str(hub), **{flag: str(value)}
        )
        with pytest.raises(errors.UserError, match=f"--{flag}=.* lies in"):
            common.check_output_folders(settings)
    beside = types.SimpleNamespace(
        export_dir=str(tmp_path / "export"),
        bert_hub_module_handle=str(hub / "encoder"),
        vocab_file="https://tfhub.dev/x/vocab.txt",
    )
    common.check_output_folders(beside)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hub"]


def test_an_export_or_output_below_a_file_is_refused_up_front(tmp_path):
    """A folder to be made below a file failed after training (a
    tf.errors traceback); an export named `folder/.` is the folder."""
    import types

    from modeling.tasks import common

    (tmp_path / "afile").write_text("x")
    for values in (
        {"export_dir": str(tmp_path / "afile" / "x")},
        {"output_dir": str(tmp_path / "afile" / "x" / "y")},
    ):
        with pytest.raises(NotADirectoryError, match="afile is a file"):
            common.check_output_folders(types.SimpleNamespace(**values))
    export = tmp_path / "export"
    assert folders.target(f"{export}/.") == str(export)
    dotted = file_io.temp_name(f"{export}/.")
    assert os.path.dirname(dotted) == str(tmp_path)


# === The other writers that replace what a user names ===


def test_convert_refuses_an_output_dir_that_is_a_file(tmp_path, capsys):
    model = tmp_path / "model"
    model.mkdir()
    hub_helpers.tiny_checkpoint(model)
    user = _user_folder(tmp_path / "user")
    before = script_runner.folder_digests(user)
    args = ["--to_hf", str(model), "--output_dir", str(user / "notes.txt")]
    with pytest.raises(SystemExit) as e:
        convert.main(args)
    assert e.value.code == 1
    assert capsys.readouterr().err == (
        f"error: The output folder {user}/notes.txt is a file, not a folder\n"
    )
    assert script_runner.folder_digests(user) == before


def _pretraining_record(value=1):
    """A serialized tf.train.Example with create_pretraining_data's seven
    features: what counts as its output (records.written_here)."""
    from modeling.data import feature_names

    feature = {
        name: tf.train.Feature(int64_list=tf.train.Int64List(value=[value]))
        for name in feature_names.PRETRAINING_FEATURES
    }
    example = tf.train.Example(features=tf.train.Features(feature=feature))
    return example.SerializeToString()


RECORD = tfrecord_io.frame(_pretraining_record())


def test_only_shard_files_of_an_earlier_run_are_stale(tmp_path):
    """create_pretraining_data's per-shard output removes an earlier run's
    shard files (of any count: all go before the new ones are renamed in),
    never a folder of such a name."""
    old = tmp_path / "out.tfrecord-00000-of-00002"
    old.write_bytes(RECORD)
    user = _user_folder(tmp_path / "out.tfrecord-00001-of-00002")
    # A text file of a shard's name (a corpus split so) is not one; an
    # empty one (a shard without instances) is.
    (tmp_path / "out.tfrecord-00002-of-00004").write_text("a corpus\n")
    empty = tmp_path / "out.tfrecord-00003-of-00005"
    empty.write_bytes(b"")
    shards = records.ShardRecordFiles(str(tmp_path / "out.tfrecord"))
    same = tmp_path / "out.tfrecord-00000-of-00003"
    same.write_bytes(RECORD)
    assert shards.stale_files(3) == [str(old), str(same), str(empty)]
    same.unlink()
    empty.unlink()
    assert shards.stale_files(3) == [str(old)]
    assert (user / "notes.txt").exists()
    # A file of the prefix's own name (a single-file run's, maybe the
    # original's) is never removed: the run is refused before it starts
    # (test_a_shard_run_beside_a_file_of_its_name_is_refused).
    single = tmp_path / "out.tfrecord"
    single.write_bytes(RECORD)
    assert shards.stale_files(3) == [str(old)]


def test_a_shard_run_beside_a_file_of_its_name_is_refused(tmp_path):
    """--per_shard_output where a file of the output's own name is (the
    original's records, say): it was deleted as "from an earlier run".
    Refused before any work, the file left as it was."""
    from modeling.pretraining_data import shards as shards_lib

    single = tmp_path / "out.tfrecord"
    single.write_bytes(RECORD)
    with pytest.raises(errors.UserError, match="a file of that name is there"):
        shards_lib.check_output_files([str(single)])
    assert single.read_bytes() == RECORD


def test_a_single_file_run_beside_shards_of_its_name_is_refused(tmp_path):
    """The reverse: out.tfrecord to be written where shards of that name
    are (an earlier --per_shard_output run's, or a Beam run's: hours of
    work, not this run's to remove); `--input_file=out.tfrecord*` would
    read both. Refused before any work, the shards left as they were."""
    from modeling.pretraining_data import shards as shards_lib

    old = [tmp_path / f"out.tfrecord-0000{i}-of-00002" for i in range(2)]
    for path in old:
        path.write_bytes(RECORD)
    final = str(tmp_path / "out.tfrecord")
    with pytest.raises(ValueError, match="2 shard files of that name"):
        shards_lib.check_output_files([final], single_files=True)
    shards_lib.check_output_files([final])  # --per_shard_output replaces.
    assert all(path.exists() for path in old)
    assert not (tmp_path / "out.tfrecord").exists()


def test_shards_never_replace_an_input_or_a_file_not_of_records(tmp_path):
    """A corpus split as wiki-00000-of-00002 and --output_file=wiki: two
    shards would have been renamed over the user's text. Refused up front;
    so is any file of a shard's name that is not this script's records."""
    from modeling.pretraining_data import shards as shards_lib

    corpus = [tmp_path / f"wiki-0000{i}-of-00002" for i in range(2)]
    for path in corpus:
        path.write_text("Some text.\n")
    prefix = str(tmp_path / "wiki")
    with pytest.raises(ValueError, match="is an input file, and shards"):
        shards_lib.check_output_files(
            [prefix], [str(corpus[0]), str(corpus[1])]
        )
    with pytest.raises(ValueError, match="is not this script's records"):
        shards_lib.check_output_files([prefix], [str(tmp_path / "other.txt")])
    assert all(p.read_text() == "Some text.\n" for p in corpus)


def test_an_interrupted_publish_never_mixes_two_runs(tmp_path, monkeypatch):
    """The earlier run's shards go before the new ones are renamed in: a
    publish cut short leaves an incomplete set, not a mixed one."""
    from modeling.data import file_io

    prefix = str(tmp_path / "out")
    names = [records.ShardRecordFiles.name(prefix, i, 2) for i in range(2)]
    for name in names:
        with open(name, "wb") as f:
            f.write(tfrecord_io.frame(_pretraining_record(7)))
    renames = []
    real = file_io.publish

    def failing_second(src, dst):
        renames.extend([dst] if dst in names else [])
        if len(renames) == 2:
            raise OSError("disk gone")
        real(src, dst)

    monkeypatch.setattr(file_io, "publish", failing_second)
    with pytest.raises(OSError, match="disk gone"):
        with records.ShardRecordFiles(prefix) as out:
            for index in range(2):
                out.write(index, [b"new"])
            out.publish(2)
    left = {
        n: list(tfrecord_io.read_records(n)) for n in names if os.path.exists(n)
    }
    assert left == {names[0]: [b"new"]}


# === Every script's settings check, in every combination ===

# Each script's task settings with the flags that get it to the check (the
# other files named need not exist: nothing is read before it). The export
# flag, or None for a script without one.
_SCRIPTS = {
    "run_classifier": (
        "export_dir",
        lambda **kw: classifier.Settings(
            bert_config_file="c.json",
            vocab_file="v.txt",
            data_dir="d",
            task_name="mrpc",
            do_train=True,
            **kw,
        ),
    ),
    "run_classifier_with_tfhub": (
        "export_dir",
        lambda **kw: classifier.HubSettings(
            bert_hub_module_handle="h", data_dir="d", task_name="mrpc", **kw
        ),
    ),
    "run_squad": (
        "export_dir",
        lambda **kw: squad.Settings(
            bert_config_file="c.json", vocab_file="v.txt", **kw
        ),
    ),
    "run_ner": (
        "export_dir",
        lambda **kw: ner.Settings(
            bert_config_file="c.json", vocab_file="v.txt", **kw
        ),
    ),
    "run_multiple_choice": (
        "export_dir",
        lambda **kw: multiple_choice.Settings(
            bert_config_file="c.json", vocab_file="v.txt", **kw
        ),
    ),
    "run_embeddings": (
        "export_dir",
        lambda **kw: embeddings.Settings(
            init_checkpoint="m", do_predict=True, predict_file="t", **kw
        ),
    ),
    "export_hub": (
        "export_path",
        lambda **kw: export_hub.run(
            export_hub.Settings(
                vocab_file="v.txt", export_type="preprocessing", **kw
            )
        ),
    ),
    "run_pretraining": (
        None,
        lambda **kw: pretraining.Settings(
            bert_config_file="c.json", input_file="r", do_train=True, **kw
        ),
    ),
}

# (output_dir, export folder, the refusal's words or None: accepted);
# "user" and "other" are folders of a user's files, "new" does not exist.
_COMBINATIONS = {
    "export at user files": (
        "new",
        "user",
        "{export} is not an export of this repository",
    ),
    "both at the same folder": ("user", "user", "{export} and {output}"),
    "export inside output": ("user", "user/data", "{export} and {output}"),
    "output inside export": ("user/data", "user", "{export} and {output}"),
    "export a link to output": ("user", "link", "{export} and {output}"),
    "each at other user files": (
        "user",
        "other",
        "{export} is not an export of this repository",
    ),
    "export at a file": ("new", "user/notes.txt", "{export} is a file"),
    "output at a file": ("user/notes.txt", "new", "{output} is a file"),
    "output at user files": ("user", "new", None),
}


def _applicable(script, combination):
    """run_pretraining has no export; export_hub no --output_dir."""
    export_flag = _SCRIPTS[script][0]
    output, export, _ = _COMBINATIONS[combination]
    if export_flag is None:
        return export == "new"
    return export_flag == "export_dir" or output == "new"


@pytest.mark.parametrize(
    "script, combination",
    [
        (script, combination)
        for script in _SCRIPTS
        for combination in _COMBINATIONS
        if _applicable(script, combination)
    ],
)
def test_every_scripts_folders_are_checked_before_it_runs(
    tmp_path, script, combination
):
    export_flag, settings = _SCRIPTS[script]
    output, export, refusal = _COMBINATIONS[combination]
    users = [_user_folder(tmp_path / "user"), _user_folder(tmp_path / "other")]
    (tmp_path / "link").symlink_to(tmp_path / "user")
    before = {p: script_runner.folder_digests(p) for p in users}
    values = {}
    if output != "new" or export_flag != "export_path":
        values["output_dir"] = str(tmp_path / output)
    if export_flag:
        values[export_flag] = str(tmp_path / export)
    if refusal is None:
        settings(**values)  # Accepted: the run would start.
        return
    with pytest.raises(REFUSED) as e:
        settings(**values)
    message = str(e.value)
    want = refusal.format(
        export=f"--{export_flag}={values.get(export_flag)}",
        output=f"--output_dir={values.get('output_dir')}",
    )
    assert want in message and "\n" not in message
    for user in users:
        assert script_runner.folder_digests(user) == before[user]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "link",
        "other",
        "user",
    ]


# === End to end ===


def test_embeddings_leave_a_users_output_dir_and_replace_an_export(tmp_path):
    """run_embeddings with --output_dir at a user's folder writes its files
    beside theirs and deletes none; its export replaces an earlier one."""
    model = tmp_path / "model"
    model.mkdir()
    hub_helpers.tiny_checkpoint(model)
    texts = tmp_path / "texts.txt"
    texts.write_text("w1 w2 w3\nw4\n")
    user = _user_folder(tmp_path / "user")
    before = script_runner.folder_digests(user)
    export = tmp_path / "export"
    _export(export, {"task": "old"})
    embeddings.run(
        embeddings.Settings(
            init_checkpoint=str(model),
            output_dir=str(user),
            export_dir=str(export),
            do_predict=True,
            predict_file=str(texts),
            max_seq_length=8,
        )
    )
    after = script_runner.folder_digests(user)
    assert {k: after[k] for k in before} == before
    assert (user / embeddings.EMBEDDINGS_FILE).exists()
    assert _info(export)["task"] == "embeddings"
    assert _no_temporaries(tmp_path)


@pytest.mark.parametrize(
    "script, args, message",
    [
        # The run that deleted checkpoints, labels and predictions.
        (
            "run_classifier.py",
            [
                "--task_name=MRPC",
                "--data_dir={root}/data",
                "--vocab_file={root}/vocab.txt",
                "--bert_config_file={root}/bert_config.json",
                "--output_dir={root}/run",
                "--export_dir={root}/run",
                "--do_train",
            ],
            "--export_dir={root}/run and --output_dir={root}/run must be "
            "separate folders",
        ),
        (
            "export_hub.py",
            [
                "--vocab_file={root}/vocab.txt",
                "--export_type=preprocessing",
                "--export_path={root}/run",
            ],
            "--export_path={root}/run is not an export of this repository",
        ),
    ],
)
def test_scripts_refuse_with_one_line(tmp_path, script, args, message):
    """The exit status and the one `error:` line; the run folder of the
    observed case keeps every file."""
    run = tmp_path / "run"
    _files(run, ["model.ckpt-1.index", "labels.json", "test_results.tsv"])
    before = script_runner.folder_digests(tmp_path)
    root = str(tmp_path)
    proc = script_runner.python(
        [script, *[a.format(root=root) for a in args]],
        timeout=300,
    )
    assert proc.returncode == 1, proc.stderr[-3000:]
    lines = [x for x in proc.stderr.splitlines() if x.startswith("error:")]
    assert len(lines) == 1 and message.format(root=root) in lines[0]
    assert "Traceback" not in proc.stderr
    assert script_runner.folder_digests(tmp_path) == before
