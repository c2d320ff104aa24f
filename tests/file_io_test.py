"""file_io: the temporary-name scheme, publish, the atomic writers and the
input glob expander, on local paths and TensorFlow's ram:// file system."""

import os
import subprocess
import sys
import tempfile
import uuid

import pytest

from modeling import errors
from modeling.data import file_io


def test_temp_name_is_hidden_and_beside_the_output(tmp_path):
    final = str(tmp_path / "out.txt")
    temp = file_io.temp_name(final)
    assert os.path.dirname(temp) == str(tmp_path)
    name = os.path.basename(temp)
    assert name.startswith(".out.txt.tmp-") and name != file_io.temp_name(final)
    assert file_io.temp_name("out.txt").startswith(".out.txt.tmp-")
    assert os.path.dirname(file_io.temp_name(str(tmp_path / "d") + "/")) == (
        str(tmp_path)
    )


def test_publish_overwrites_and_remove_if_exists(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_bytes(b"new")
    b.write_bytes(b"old")
    file_io.publish(str(a), str(b))
    assert b.read_bytes() == b"new" and not a.exists()
    file_io.remove_if_exists(str(b))
    file_io.remove_if_exists(str(b))  # Absent: no error.
    assert not b.exists()
    folder = tmp_path / "folder"
    (folder / "sub").mkdir(parents=True)
    (folder / "sub" / "f").write_text("x")
    file_io.remove_if_exists(folder)
    assert not folder.exists()


def test_atomic_write_publishes_text_and_bytes(tmp_path):
    out = tmp_path / "out.txt"
    out.write_text("old\n")
    with file_io.atomic_write(out) as f:
        f.write("caf\u00e9\n")
        assert out.read_text() == "old\n"  # Not published yet.
    assert out.read_bytes() == "caf\u00e9\n".encode()
    with file_io.atomic_write(out, "wb") as f:
        f.write(b"\x00\x01")
    assert out.read_bytes() == b"\x00\x01"
    assert os.listdir(tmp_path) == ["out.txt"]


def test_atomic_writers_leave_no_temp_on_an_error(tmp_path):
    out = tmp_path / "out.txt"
    with pytest.raises(RuntimeError), file_io.atomic_write(out) as f:
        f.write("partial")
        raise RuntimeError
    with pytest.raises(RuntimeError), file_io.atomic_path(out) as temp:
        with open(temp, "w") as f:
            f.write("partial")
        raise RuntimeError
    with pytest.raises(RuntimeError), file_io.atomic_path(out) as temp:
        os.makedirs(os.path.join(temp, "sub"))  # A SavedModel-like folder.
        raise RuntimeError
    assert os.listdir(tmp_path) == []


def test_write_texts_publishes_all_or_none(tmp_path, monkeypatch):
    """A failure before the renames leaves every earlier file as it was; a
    SIGTERM during the renames waits until all are done."""
    import signal

    from modeling import errors

    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    file_io.write_texts({a: "old a", b: "old b"})
    with pytest.raises(FileNotFoundError):
        file_io.write_texts({a: "new a", tmp_path / "no" / "b.txt": "x"})
    assert a.read_text() == "old a"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "b.txt"]
    # A close that fails (a full disk) fails before anything is published,
    # whichever file it is.
    real_open = open

    class FullDisk:
        def __init__(self, f):
            self.f = f

        def write(self, text):
            return self.f.write(text)

        def close(self):
            self.f.close()
            if os.path.basename(self.f.name).startswith(".a.txt"):
                raise OSError(28, "No space left on device")

    def opener(path, *args, **kwargs):
        return FullDisk(real_open(path, *args, **kwargs))

    monkeypatch.setattr("builtins.open", opener)
    with pytest.raises(OSError, match="No space"):
        file_io.write_texts({a: "new a", b: "new b"})
    monkeypatch.undo()
    assert (a.read_text(), b.read_text()) == ("old a", "old b")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "b.txt"]

    published = []
    publish = file_io.publish

    def publish_then_sigterm(temp, final):
        publish(temp, final)
        published.append(os.path.basename(final))
        if len(published) == 1:
            signal.raise_signal(signal.SIGTERM)

    class Terminated(Exception):
        pass

    def handler(signum, frame):
        if errors._DEFERRAL["depth"]:
            errors._DEFERRAL["pending"] = True
            return
        raise Terminated

    monkeypatch.setattr(file_io, "publish", publish_then_sigterm)
    old = signal.signal(signal.SIGTERM, handler)
    try:
        with pytest.raises(Terminated):
            file_io.write_texts({a: "new a", b: "new b"})
    finally:
        signal.signal(signal.SIGTERM, old)
    assert sorted(published) == ["a.txt", "b.txt"]
    assert (a.read_text(), b.read_text()) == ("new a", "new b")


def test_atomic_path_publishes_a_folder(tmp_path):
    out = tmp_path / "export"
    with file_io.atomic_path(str(out)) as temp:
        os.makedirs(os.path.join(temp, "variables"))
        assert not out.exists()
    assert (out / "variables").is_dir()
    assert os.listdir(tmp_path) == ["export"]


def _before(events, event):
    """The events before `event` (its first occurrence)."""
    return events[: events.index(event)]


def test_outputs_are_on_the_disk_before_they_replace_anything(
    tmp_path, disk_events
):
    """Each temporary file is synced before the first rename, and the
    folder after the last: a power cut then leaves the new files or the
    old ones, never an empty file under the old name (a file system may
    put a rename on the disk before the data it names)."""
    tmp_path = tmp_path.resolve()
    finals = [str(tmp_path / "a.txt"), str(tmp_path / "b.txt")]
    (tmp_path / "a.txt").write_text("an earlier run's")
    file_io.write_texts(dict.fromkeys(finals, "new"))
    renames = [e for e in disk_events if e[0] == "rename"]
    assert [e[2] for e in renames] == finals
    synced = {e[1] for e in _before(disk_events, renames[0])}
    assert {e[1] for e in renames} <= synced
    assert ("sync", str(tmp_path)) in disk_events[
        disk_events.index(renames[-1]) :
    ]

    # A folder (a SavedModel): every file in it, and its folders.
    disk_events.clear()
    out = tmp_path / "export"
    with file_io.atomic_path(str(out)) as temp:
        os.makedirs(os.path.join(temp, "variables"))
        for name in ("saved_model.pb", "variables/variables.index"):
            with open(os.path.join(temp, name), "w") as f:
                f.write(name)
    (rename,) = [e for e in disk_events if e[0] == "rename"]
    temp = rename[1]
    assert {e[1] for e in _before(disk_events, rename)} == {
        temp,
        f"{temp}/variables",
        f"{temp}/saved_model.pb",
        f"{temp}/variables/variables.index",
    }
    assert disk_events[-1] == ("sync", str(tmp_path))


class _FailingClose:
    """A file whose close() fails, as on a full disk."""

    def __init__(self, path):
        self._file = open(path, "w")  # noqa: SIM115
        self.closes = 0

    def write(self, text):
        self._file.write(text)

    def close(self):
        self.closes += 1
        self._file.close()
        raise OSError(28, "No space left on device")


def test_a_failing_close_removes_the_temp_and_raises_once(
    tmp_path, monkeypatch
):
    files = []

    def fake_open(path, mode="r", **kwargs):
        files.append(_FailingClose(path))
        return files[-1]

    # file_io's own `open` (a module global shadows the builtin).
    monkeypatch.setattr(file_io, "open", fake_open, raising=False)
    with (
        pytest.raises(OSError, match="No space"),
        file_io.atomic_write(tmp_path / "out.txt") as f,
    ):
        f.write("data")
    assert [f.closes for f in files] == [1]
    assert os.listdir(tmp_path) == []


@pytest.fixture
def ram_dir():
    tf = pytest.importorskip("tensorflow")
    folder = f"ram://file_io_test_{uuid.uuid4().hex}"
    tf.io.gfile.makedirs(folder)
    yield folder
    tf.io.gfile.rmtree(folder)


def test_remote_paths_go_through_gfile(ram_dir):
    import tensorflow as tf

    out = f"{ram_dir}/out.txt"
    assert file_io.is_remote(out) and not file_io.is_remote("/a/b")
    with file_io.atomic_write(out) as f:
        f.write("one\n")
    with file_io.atomic_write(out) as f:  # Published over the old file.
        f.write("two\n")
    with tf.io.gfile.GFile(out) as f:
        assert f.read() == "two\n"
    with pytest.raises(RuntimeError), file_io.atomic_write(out) as f:
        f.write("partial")
        raise RuntimeError
    assert tf.io.gfile.listdir(ram_dir) == ["out.txt"]
    with file_io.atomic_path(f"{ram_dir}/b.txt") as temp:
        assert temp.startswith(f"{ram_dir}/.b.txt.tmp-")
        with tf.io.gfile.GFile(temp, "w") as f:
            f.write("b")
    assert file_io.expand_input_files(f"{ram_dir}/*.txt") == [
        f"{ram_dir}/b.txt",
        f"{ram_dir}/out.txt",
    ]
    # A remote folder among the matches is named where it is read.
    tf.io.gfile.makedirs(f"{ram_dir}/sub.txt")
    from modeling.data import input_pipeline

    with pytest.raises(errors.UserError, match="sub.txt cannot be read"):
        input_pipeline.check_record_files(
            file_io.expand_input_files(f"{ram_dir}/sub.*")
        )
    tf.io.gfile.rmtree(f"{ram_dir}/sub.txt")
    file_io.remove_if_exists(out)
    file_io.remove_if_exists(out)
    assert not tf.io.gfile.exists(out)


def test_expand_input_files_sorts_globs_and_names_bad_patterns(tmp_path):
    for name in ("b.txt", "a.txt", "c.md"):
        (tmp_path / name).write_text("x\n")
    expand = file_io.expand_input_files
    assert expand(f"{tmp_path}/*.txt") == [
        str(tmp_path / "a.txt"),
        str(tmp_path / "b.txt"),
    ]
    assert expand(f"{tmp_path}/[ab].txt, ,{tmp_path}/c.md") == [
        str(tmp_path / "a.txt"),
        str(tmp_path / "b.txt"),
        str(tmp_path / "c.md"),
    ]
    with pytest.raises(FileNotFoundError, match="nope"):
        expand(f"{tmp_path}/a.txt,{tmp_path}/nope*")
    with pytest.raises(FileNotFoundError, match="No input files"):
        expand(" , ")
    (tmp_path / "d.txt").mkdir()
    with pytest.raises(IsADirectoryError, match="d.txt"):
        expand(f"{tmp_path}/*.txt")


def _dead_pid():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_a_writer_sweeps_what_killed_writers_left(tmp_path, monkeypatch):
    monkeypatch.setattr(file_io, "_swept", set())
    dead, host = _dead_pid(), file_io._HOST
    other_host = f"{(int(host, 16) + 1) % 0x10000:04x}"
    stale = [
        f".out.tfrecord.tmp-{dead}-{host}0a1b2c",
        f".model.ckpt-7.tmp-{dead}-{host}0a1b2c.index",
        f".model.ckpt-7.tmp-{dead}-{host}0a1b2c.data-00000-of-00001",
    ]
    kept = [
        f".out.tfrecord.tmp-{os.getpid()}-{host}0a1b2c",  # this process
        f".out.tfrecord.tmp-{dead}-{other_host}0a1b2c",  # another host's
        "out.tfrecord",
        f"tmp-{dead}-{host}0a1b2c",  # not a temporary name of ours
    ]
    for name in stale + kept:
        (tmp_path / name).write_text("x")
    (tmp_path / f".saved.tmp-{dead}-{host}0a1b2c").mkdir()  # a folder
    stale.append(f".saved.tmp-{dead}-{host}0a1b2c")
    file_io.write_text(tmp_path / "new.txt", "new")
    assert sorted(os.listdir(tmp_path)) == sorted(kept + ["new.txt"])


def test_scratch_dirs_of_killed_runs_are_removed(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    dead = _dead_pid()
    stale = tmp_path / f"bert_shards_{dead}-{file_io._HOST}_x1"
    stale.mkdir()
    (stale / "0.bin").write_bytes(b"x")
    other = tmp_path / f"bert_records_{dead}-{file_io._HOST}_x1"
    other.mkdir()
    with file_io.scratch_dir("bert_shards_") as scratch:
        assert os.path.basename(scratch).startswith(
            f"bert_shards_{os.getpid()}-{file_io._HOST}_"
        )
        assert not stale.exists()
        assert other.exists()  # another prefix: not this writer's to judge
    assert not os.path.exists(scratch)


def test_an_exit_that_skips_clean_up_removes_the_temporaries(tmp_path):
    """The SIGTERM watchdog's os._exit skips the writers' own clean-up; it
    calls remove_open_temporaries first, which leaves nothing behind."""
    final = tmp_path / "out.txt"
    with pytest.raises(OSError):  # noqa: PT012 (the write is the setup)
        with file_io.atomic_write(final) as f:
            f.write("partial")
            (temp,) = tmp_path.iterdir()
            assert temp.name != final.name
            file_io.remove_open_temporaries()
            assert list(tmp_path.iterdir()) == []
    assert not final.exists()
    with file_io.atomic_write(final) as f:
        f.write("done")
    file_io.remove_open_temporaries()  # Nothing under way: nothing goes.
    assert final.read_text() == "done"


def test_a_remote_path_that_cannot_be_reached_is_one_line(monkeypatch):
    """No network, no such bucket, no credentials: tf.errors other than
    NotFound / PermissionDenied were a traceback of TensorFlow's."""
    import tensorflow as tf

    from modeling import errors

    def unreachable(path):
        raise tf.errors.FailedPreconditionError(
            None,
            None,
            "Error executing an HTTP request: Could not resolve host",
        )

    monkeypatch.setattr(tf.io.gfile, "exists", unreachable)
    with pytest.raises(errors.UserError) as e:
        file_io.check_folder_path("gs://no-such-bucket/out", "--output_dir")
    assert str(e.value) == (
        "gs://no-such-bucket/out: cannot reach it (Error executing an HTTP "
        "request: Could not resolve host)"
    )


def test_remote_lines_split_at_newlines_only():
    """A remote file's lines (GFile's readline drops every \\r, so a line
    "b\\rc" read as "bc") are split here, in blocks, at b"\\n" only."""
    import io

    data = b"\xef\xbb\xbfa\r\nb\rc\n\nd"
    for block in (1, 2, 3, 1 << 20):
        got = list(file_io._split_at_newlines(io.BytesIO(data), block))
        assert got == [b"\xef\xbb\xbfa\r\n", b"b\rc\n", b"\n", b"d"], block
    assert list(file_io._split_at_newlines(io.BytesIO(b""))) == []


def test_a_trailing_dot_is_stripped_but_dotdot_is_the_file_systems(tmp_path):
    """ "x/." is x; "link/../y" is left to the file system (normpath made it
    ./y while the file system reads the link's parent's y)."""
    from modeling.export import folders

    real = tmp_path / "real" / "inner"
    real.mkdir(parents=True)
    (tmp_path / "link").symlink_to(real)
    assert file_io.strip_dot(f"{tmp_path}/x/./.") == f"{tmp_path}/x"
    assert file_io.strip_dot("/") == "/"
    via_link = f"{tmp_path}/link/../exp"
    assert folders.target(via_link) == via_link
    assert os.path.dirname(file_io.temp_name(via_link)) == f"{tmp_path}/link/.."


def test_stale_outputs_go_only_once_the_new_ones_are_in_place(tmp_path):
    """run_squad's v1 predictions beside a v2 run's null_odds.json: it is
    removed in the same publish, after the new files are in place; a write
    that fails removes nothing (it was deleted before the write)."""
    old = tmp_path / "null_odds.json"
    old.write_text("{}")
    out = tmp_path / "predictions.json"
    with pytest.raises(RuntimeError):
        with file_io.atomic_writes([out], stale=[old]) as (f,):
            f.write("partial")
            raise RuntimeError("a full disk")
    assert old.exists() and not out.exists()
    file_io.write_texts({out: "{}\n"}, stale=[old])
    assert out.read_text() == "{}\n" and not old.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["predictions.json"]


def test_an_output_that_is_a_link_is_written_through_it(tmp_path):
    """As open() writes (the original's outputs did): the link stays a
    link and its target gets the new content (the rename replaced the link
    with a file, leaving the target's old content)."""
    (tmp_path / "real").mkdir()
    target = tmp_path / "real" / "out.jsonl"
    target.write_text("old\n")
    link = tmp_path / "out.jsonl"
    link.symlink_to(target)
    with file_io.atomic_write(str(link)) as f:
        f.write("new\n")
    assert link.is_symlink() and target.read_text() == "new\n"
    assert not [p for p in (tmp_path / "real").iterdir() if ".tmp-" in p.name]
    # The checkpoint writers replace a link, as the original's Saver did
    # (tests/checkpoints_test.py).
    with file_io.atomic_write(str(link), follow_links=False) as f:
        f.write("own\n")
    assert not link.is_symlink() and link.read_text() == "own\n"
    assert target.read_text() == "new\n"
    # A dangling link's missing folder is named with the flag.
    dangling = tmp_path / "d.jsonl"
    dangling.symlink_to(tmp_path / "nowhere" / "x.jsonl")
    with pytest.raises(
        FileNotFoundError, match="--output_file=d.jsonl \\(a link"
    ):
        file_io.check_file_path(str(dangling), "--output_file=d.jsonl")
