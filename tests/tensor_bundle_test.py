"""modeling.tensor_bundle: the original checkpoint format without TensorFlow,
checked against TensorFlow's own writer (SaveV2, byte for byte) and reader
(tf.train.load_checkpoint), and against the original release's golden
checkpoints."""

import shutil
import struct
import textwrap

import ml_dtypes
import numpy as np
import pytest
import script_runner
import tensorflow as tf

from modeling import tensor_bundle
from modeling.data import tfrecord_io

DATA = ".data-00000-of-00001"


def _mixed():
    """One tensor of each dtype and rank a BERT checkpoint (or a bf16 /
    fp16 run) holds, with a 0-d and an empty one."""
    rng = np.random.default_rng(0)
    return {
        "bert/encoder/layer_0/attention/self/query/kernel": rng.standard_normal(
            (4, 4)
        ).astype(np.float32),
        "bert/embeddings/LayerNorm/gamma": np.ones(4, np.float32),
        "cls/predictions/output_bias": np.arange(7, dtype=np.float16),
        "bf16/kernel": rng.standard_normal((2, 3)).astype(ml_dtypes.bfloat16),
        "global_step": np.int64(3),
        "ids": np.array([[1, -2], [3, 4]], np.int32),
        "f64": np.array([0.5, -1e300]),
        "mask": np.array([True, False, True]),
        "bytes": np.arange(5, dtype=np.uint8),
        "empty": np.zeros((0, 4), np.float32),
    }


def _many():
    """Enough long names for several 256 KB index blocks; steps of 3 make
    both kinds of block separator (shortened and not)."""
    return {f"n{i:04d}/" + "k" * 250: np.float32(i) for i in range(0, 6000, 3)}


def _save_v2(prefix, arrays):
    names = sorted(arrays)
    tf.raw_ops.SaveV2(
        prefix=str(prefix),
        tensor_names=names,
        shape_and_slices=[""] * len(names),
        tensors=[tf.constant(arrays[n]) for n in names],
    )


def _assert_same(got, want):
    assert sorted(got) == sorted(want)
    for name, value in want.items():
        value = np.asarray(value)
        assert got[name].dtype == value.dtype, name
        assert got[name].shape == value.shape, name
        np.testing.assert_array_equal(
            got[name].astype(np.float64), value.astype(np.float64), name
        )


def _read_all(prefix):
    reader = tensor_bundle.read(prefix)
    return {name: reader.get_tensor(name) for name in reader.names}


def _tf_read_all(prefix):
    reader = tf.train.load_checkpoint(str(prefix))
    return {n: reader.get_tensor(n) for n in reader.get_variable_to_shape_map()}


def test_round_trip_metadata_without_values(tmp_path):
    arrays = _mixed()
    tensor_bundle.write(tmp_path / "ckpt", arrays)
    reader = tensor_bundle.read(tmp_path / "ckpt")
    assert reader.names == sorted(arrays)
    assert reader.shapes == {n: np.shape(a) for n, a in arrays.items()}
    assert reader.dtypes["bf16/kernel"] == "bfloat16"
    assert reader.dtypes["global_step"] == "int64"
    assert reader.get_variable_to_shape_map()["ids"] == [2, 2]
    got = _read_all(tmp_path / "ckpt")
    _assert_same(got, arrays)
    got["ids"][0, 0] = 9  # writable, as TensorFlow's reader gives them
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "ckpt" + DATA,
        "ckpt.index",
    ]


def test_values_from_variables_and_tensors(tmp_path):
    import keras

    arrays = {
        "keras": keras.Variable(np.full((2, 2), 1.5, np.float32)),
        "tf_var": tf.Variable([1, 2], dtype=tf.int64),
        "tf_tensor": tf.constant([True, False]),
    }
    tensor_bundle.write(tmp_path / "ckpt", arrays)
    _assert_same(
        _read_all(tmp_path / "ckpt"),
        {n: np.asarray(v) for n, v in arrays.items()},
    )


@pytest.mark.parametrize("tensors", [_mixed, _many])
def test_same_bytes_as_save_v2_and_both_readers_agree(tmp_path, tensors):
    arrays = tensors()
    _save_v2(tmp_path / "theirs", arrays)
    tensor_bundle.write(tmp_path / "ours", arrays)
    for suffix in (".index", DATA):
        theirs = (tmp_path / ("theirs" + suffix)).read_bytes()
        assert (tmp_path / ("ours" + suffix)).read_bytes() == theirs, suffix
    if tensors is _many:  # several data blocks and index entries
        assert (tmp_path / "ours.index").stat().st_size > 2 << 18
    # Ours reads TensorFlow's files, TensorFlow (and the original's TF1
    # reader) reads ours: the same values.
    _assert_same(
        _read_all(tmp_path / "theirs"), _tf_read_all(tmp_path / "ours")
    )
    tf1 = tf.compat.v1.train.NewCheckpointReader(str(tmp_path / "ours"))
    assert tf1.get_variable_to_shape_map() == (
        tensor_bundle.read(tmp_path / "ours").get_variable_to_shape_map()
    )


def test_reads_a_sharded_save(tmp_path):
    arrays = _mixed()
    names = sorted(arrays)
    parts = [str(tmp_path / f"part{k}") for k in (0, 1)]
    _save_v2(parts[0], {n: arrays[n] for n in names[::2]})
    _save_v2(parts[1], {n: arrays[n] for n in names[1::2]})
    tf.raw_ops.MergeV2Checkpoints(
        checkpoint_prefixes=parts, destination_prefix=str(tmp_path / "ckpt")
    )
    assert (tmp_path / "ckpt.data-00001-of-00002").exists()
    reader = tensor_bundle.read(tmp_path / "ckpt")
    assert reader.num_shards == 2
    _assert_same(_read_all(tmp_path / "ckpt"), arrays)


def test_refuses_a_partitioned_variable(tmp_path):
    tf.raw_ops.SaveV2(
        prefix=str(tmp_path / "ckpt"),
        tensor_names=["part/kernel"],
        shape_and_slices=["4 2 0,2:-"],
        tensors=[tf.zeros([2, 2])],
    )
    with pytest.raises(ValueError) as info:
        tensor_bundle.read(tmp_path / "ckpt")
    assert str(info.value) == (
        f"{tmp_path}/ckpt.index: tensor 'part/kernel' is partitioned (saved "
        "in slices), which this reader does not support: re-save it "
        "unpartitioned"
    )


def _one_line_error(prefix, name=None):
    with pytest.raises(ValueError) as info:
        reader = tensor_bundle.read(prefix)
        reader.get_tensor(name)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_damaged_files_give_one_line_naming_the_file(tmp_path):
    tensor_bundle.write(tmp_path / "ckpt", _mixed())
    index, data = tmp_path / "ckpt.index", tmp_path / ("ckpt" + DATA)
    good_index, good_data = index.read_bytes(), data.read_bytes()
    before = script_runner.folder_digests(tmp_path)
    name = "mask"  # the last in sorted order: 3 bytes at the end
    expected_index_error = (
        f"{index} is not a readable checkpoint index (truncated or corrupt): "
    )

    index.write_bytes(good_index[:-60])
    message = _one_line_error(tmp_path / "ckpt")
    assert message.startswith(expected_index_error)
    index.write_bytes(good_index[:40] + b"\xff" + good_index[41:])
    message = _one_line_error(tmp_path / "ckpt")
    assert message == expected_index_error + "block CRC mismatch at offset 0"
    index.write_bytes(good_index)

    data.write_bytes(good_data[:-1])
    assert _one_line_error(tmp_path / "ckpt", name) == (
        f"{data} is truncated: tensor 'mask' needs 3 bytes at offset "
        f"{len(good_data) - 3}, the file has 2 there"
    )
    data.write_bytes(good_data[:-1] + bytes([good_data[-1] ^ 1]))
    assert _one_line_error(tmp_path / "ckpt", name) == (
        f"{data} is corrupt: the bytes of tensor {name!r} fail their CRC-32C "
        "check"
    )
    # Reading changes nothing in the folder.
    data.write_bytes(good_data)
    assert script_runner.folder_digests(tmp_path) == before


def test_refuses_a_compressed_index_block(tmp_path):
    tensor_bundle.write(tmp_path / "ckpt", {"w": np.ones(2, np.float32)})
    index = tmp_path / "ckpt.index"
    raw = bytearray(index.read_bytes())
    # One data block at offset 0, then the (8-byte) metaindex block and the
    # index block, each with a 5-byte trailer: the footer's index handle
    # gives the data block's size. Its trailer's compression type is set to
    # snappy (1), with a CRC that matches.
    footer = bytes(raw[-48:])
    _, pos = tensor_bundle._read_varint(footer, 0)
    _, pos = tensor_bundle._read_varint(footer, pos)
    index_offset, _ = tensor_bundle._read_varint(footer, pos)
    block_size = index_offset - (5 + 8 + 5)
    raw[block_size] = 1
    crc = tfrecord_io.masked_crc32c(bytes(raw[: block_size + 1]))
    raw[block_size + 1 : block_size + 5] = struct.pack("<I", crc)
    index.write_bytes(bytes(raw))
    assert _one_line_error(tmp_path / "ckpt").endswith(
        "a snappy-compressed block, which TensorFlow never writes in a "
        "checkpoint index"
    )


def test_golden_checkpoints_read_and_rewritten_byte_for_byte(
    golden_dir, tmp_path
):
    """The original release's checkpoints (its TF1 Saver): read as
    TensorFlow reads them, and written back to the same bytes."""
    for folder, prefix in (
        ("tiny_init", "bert_model.ckpt"),
        ("tiny_after_3_steps", "model.ckpt-3"),
    ):
        source = golden_dir / folder / prefix
        arrays = _read_all(source)
        _assert_same(arrays, _tf_read_all(source))
        tensor_bundle.write(tmp_path / prefix, arrays)
        for suffix in (".index", DATA):
            theirs = source.with_name(prefix + suffix).read_bytes()
            assert (tmp_path / (prefix + suffix)).read_bytes() == theirs


def test_checkpoints_work_without_tensorflow_or_keras(tmp_path, golden_dir):
    shutil.copytree(golden_dir / "tiny_after_3_steps", tmp_path / "golden")
    code = textwrap.dedent(
        """
        import numpy as np
        from modeling import checkpoints
        folder, golden = sys.argv[1], sys.argv[2]
        arrays = checkpoints.read_checkpoint(golden)
        assert arrays["global_step"] == 3 and len(arrays) == 139
        arrays["half"] = np.ones(3, np.float16)
        import jax.numpy as jnp  # what the JAX backend's variables hold

        arrays["jax/bf16"] = jnp.arange(4, dtype=jnp.bfloat16)
        for step in (4, 5):
            checkpoints.write_checkpoint(
                f"{folder}/model.ckpt-{step}", arrays, keep_max=1
            )
        assert checkpoints.resolve_checkpoint(folder).endswith("ckpt-5")
        again = checkpoints.read_checkpoint(folder)
        assert all(np.array_equal(again[n], arrays[n]) for n in arrays)
        assert again["jax/bf16"].dtype.name == "bfloat16"
        heavy = [m for m in ("tensorflow", "keras") if m in sys.modules]
        print("heavy:", heavy)
        """
    )
    proc = script_runner.run_without_tensorflow(
        [str(tmp_path / "out"), str(tmp_path / "golden")], code=code
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().splitlines()[-1] == "heavy: []"
    # TensorFlow reads what was written there.
    state = tf.train.get_checkpoint_state(str(tmp_path / "out"))
    assert state.model_checkpoint_path == str(tmp_path / "out/model.ckpt-5")
    reader = tf.train.load_checkpoint(str(tmp_path / "out"))
    assert reader.get_tensor("half").dtype == np.float16
    np.testing.assert_array_equal(
        reader.get_tensor("jax/bf16").astype(np.float32), [0, 1, 2, 3]
    )


def test_a_failed_rewrite_of_a_prefix_leaves_the_old_checkpoint(
    tmp_path, monkeypatch
):
    """The data file was renamed over the old one first, then removed when
    the index failed: the checkpoint at that prefix was gone. Both files
    are now published as one."""
    prefix = str(tmp_path / "model.ckpt-0")
    tensor_bundle.write(prefix, {"w": np.arange(3, dtype=np.float32)})

    def failing(entries):
        raise OSError("disk full")

    monkeypatch.setattr(tensor_bundle, "_build_table", failing)
    with pytest.raises(OSError, match="disk full"):
        tensor_bundle.write(prefix, {"w": np.zeros(5, np.float32)})
    np.testing.assert_array_equal(
        tensor_bundle.read(prefix).get_tensor("w"), [0.0, 1.0, 2.0]
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "model.ckpt-0.data-00000-of-00001",
        "model.ckpt-0.index",
    ]


def test_a_checkpoint_is_on_the_disk_before_its_index_marks_it(
    tmp_path, disk_events
):
    """Both files synced before either is renamed into place (the index,
    which marks the checkpoint present, last), then the folder: after a
    power cut the checkpoint a state file names is whole."""
    prefix = str(tmp_path.resolve() / "model.ckpt-0")
    tensor_bundle.write(prefix, {"w": np.arange(3, dtype=np.float32)})
    renames = [e for e in disk_events if e[0] == "rename"]
    assert [e[2] for e in renames] == [prefix + DATA, prefix + ".index"]
    synced = {e[1] for e in disk_events[: disk_events.index(renames[0])]}
    assert {e[1] for e in renames} <= synced
    assert disk_events[-1] == ("sync", str(tmp_path.resolve()))


def _entry(dtype, shape, offset, size):
    """A hand-made index entry (BundleEntryProto): a hostile file's."""
    dims = b"".join(
        tensor_bundle._message_field(2, tensor_bundle._int_field(1, x))
        for x in shape
    )
    return (
        tensor_bundle._int_field(1, dtype)
        + tensor_bundle._message_field(2, dims)
        + tensor_bundle._int_field(4, offset)
        + tensor_bundle._int_field(5, size)
        + b"\x35"
        + struct.pack("<I", 0)
    )


def _hand_made(prefix, entries):
    (prefix.parent / (prefix.name + DATA)).write_bytes(b"\0" * 16)
    (prefix.parent / (prefix.name + ".index")).write_bytes(
        tensor_bundle._build_table(entries)
    )


def test_a_lying_index_is_one_line_not_a_crash(tmp_path):
    """An index claiming a 4 TiB tensor (its shape and size agreeing) was
    read with f.read(4 TiB): MemoryError. A field of another wire type (a
    number where the shape's message goes): TypeError, the file unnamed."""
    header = (b"", tensor_bundle._HEADER)
    huge = tmp_path / "huge"
    _hand_made(
        huge, [header, (b"w", _entry(1, [1 << 20, 1 << 20], 0, 1 << 42))]
    )
    assert _one_line_error(huge, "w").startswith(
        f"{huge}{DATA} is truncated: tensor 'w' needs {1 << 42} bytes at "
        "offset 0, the file has 16 there"
    )
    odd = tmp_path / "odd"
    shape_as_number = tensor_bundle._int_field(1, 1) + tensor_bundle._int_field(
        2, 5
    )
    _hand_made(odd, [header, (b"w", shape_as_number)])
    assert _one_line_error(odd).startswith(
        f"{odd}.index is not a readable checkpoint index (truncated or "
        "corrupt): "
    )
