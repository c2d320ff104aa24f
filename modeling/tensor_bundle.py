"""The original release's checkpoint files, read and written without
TensorFlow: TensorFlow's V2 "tensor bundle" format.

A checkpoint `<prefix>` is two kinds of file:
- `<prefix>.data-00000-of-00001` (or `.data-0000k-of-0000n` for a sharded
  save): the tensors' bytes one after another, little-endian, C order, no
  padding.
- `<prefix>.index`: a LevelDB-format table (sorted keys in data blocks of
  about 256 KB, each key stored as the length it shares with the one before
  plus its new bytes, a full key every 16 entries (a restart point); an
  index block naming each data block by a key that separates it from the
  next; a 48-byte footer). Its values are protocol buffers: under the empty
  key a BundleHeaderProto (number of data shards, endianness, format
  version), under each tensor name a BundleEntryProto (dtype, shape, shard,
  offset and size in the data file, masked CRC-32C of the bytes).

TensorFlow writes bundle indexes uncompressed (tensor_bundle.cc sets
kNoCompression: old releases and some platforms cannot read snappy), so a
compressed block here means the file is not one of those, and is refused.
`write` produces the bytes tf.raw_ops.SaveV2 writes for the same tensors in
sorted order (tests/tensor_bundle_test.py compares them), so
tf.train.load_checkpoint and the original's TF1 scripts read it.

Needs numpy and google-crc32c (modeling.data.tfrecord_io's masked CRC); no
TensorFlow and no protobuf package: the few proto fields are decoded here.
bfloat16 tensors need ml_dtypes (installed with TensorFlow or JAX).

One module, over 500 lines: one file format, its reader and its writer, which
must agree byte for byte.
"""

import collections
import os
import struct

import numpy as np

from modeling.data import file_io
from modeling.data import tfrecord_io

# TensorFlow's DataType enum (types.proto) for the dtypes checkpoints hold.
_DTYPE_NAMES = {
    1: "float32",
    2: "float64",
    3: "int32",
    4: "uint8",
    5: "int16",
    6: "int8",
    7: "string",
    8: "complex64",
    9: "int64",
    10: "bool",
    14: "bfloat16",
    17: "uint16",
    18: "complex128",
    19: "float16",
    20: "resource",
    21: "variant",
    22: "uint32",
    23: "uint64",
}
_DTYPE_ENUMS = {name: n for n, name in _DTYPE_NAMES.items()}
_NOT_NUMPY = ("string", "resource", "variant")

# table_options.h and table_builder.cc: data blocks are closed once their
# estimated size reaches block_size; a restart point every 16 keys (every
# key in the index block).
_BLOCK_SIZE = 262144
_RESTART_INTERVAL = 16
_TABLE_MAGIC = 0xDB4775248B80FB57
_FOOTER_SIZE = 48  # Two block handles padded to 40 bytes, the magic number.
_BLOCK_TRAILER = 5  # Compression type (1 byte), masked CRC-32C (4 bytes).

# BundleHeaderProto{num_shards: 1, endianness: LITTLE, version{producer: 1}}
# as SaveV2 writes it; a reader of format version 1 (tensor_bundle.cc
# kTensorBundleVersion) refuses bundles whose min_consumer is above that.
_HEADER = b"\x08\x01\x1a\x02\x08\x01"
_READER_VERSION = 1


def data_filename(prefix, shard, num_shards):
    """`<prefix>.data-0000k-of-0000n`, the name of data shard k of n."""
    return f"{prefix}.data-{shard:05d}-of-{num_shards:05d}"


# === Protocol buffer wire format (the fields of three small messages) ===


def _varint(value):
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _read_varint(buf, pos):
    """(value, next position); IndexError past the end, ValueError when
    longer than 10 bytes."""
    value = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
        if shift > 63:
            raise ValueError("a varint longer than 10 bytes")


def _int_field(number, value):
    # proto3 leaves fields at their default (0) out.
    return _varint(number << 3) + _varint(value) if value else b""


def _message_field(number, body):
    return _varint(number << 3 | 2) + _varint(len(body)) + body


def parse_message(buf):
    """{field number: [values]}: ints for varint / fixed fields, bytes for
    length-delimited ones (a nested message: parse it in turn). Raises
    ValueError or IndexError when malformed. Also what export/folders.py
    reads a SavedModel's asset names with."""
    fields, pos = {}, 0
    while pos < len(buf):
        tag, pos = _read_varint(buf, pos)
        number, wire_type = tag >> 3, tag & 7
        if wire_type == 0:
            value, pos = _read_varint(buf, pos)
        elif wire_type in (1, 5):
            size = 8 if wire_type == 1 else 4
            if pos + size > len(buf):
                raise ValueError("a field past the end of its message")
            value = int.from_bytes(buf[pos : pos + size], "little")
            pos += size
        elif wire_type == 2:
            size, pos = _read_varint(buf, pos)
            if pos + size > len(buf):
                raise ValueError("a field past the end of its message")
            value, pos = bytes(buf[pos : pos + size]), pos + size
        else:
            raise ValueError(f"wire type {wire_type}")
        fields.setdefault(number, []).append(value)
    return fields


def _last(fields, number, default=0):
    return fields[number][-1] if number in fields else default


# === The index: a LevelDB-format table ===


def _block_entries(block):
    """The (key, value) pairs of one block, keys rebuilt from their shared
    prefixes; the restart array at its end is only checked for size."""
    if len(block) < 4:
        raise ValueError("a block shorter than its restart count")
    (num_restarts,) = struct.unpack_from("<I", block, len(block) - 4)
    end = len(block) - 4 * (num_restarts + 1)
    if num_restarts == 0 or end < 0:
        raise ValueError("a block with a bad restart array")
    entries, key, pos = [], b"", 0
    while pos < end:
        shared, pos = _read_varint(block, pos)
        unshared, pos = _read_varint(block, pos)
        size, pos = _read_varint(block, pos)
        if shared > len(key) or pos + unshared + size > end:
            raise ValueError("an entry past the end of its block")
        key = key[:shared] + bytes(block[pos : pos + unshared])
        pos += unshared
        entries.append((key, bytes(block[pos : pos + size])))
        pos += size
    return entries


def _read_block(data, handle, limit):
    """The contents of the block at `handle` (a block handle's bytes),
    its CRC checked; `limit` is where the footer starts."""
    offset, pos = _read_varint(handle, 0)
    size, _ = _read_varint(handle, pos)
    if offset + size + _BLOCK_TRAILER > limit:
        raise ValueError("a block past the end of the file")
    block = data[offset : offset + size + 1]  # with its compression type
    (crc,) = struct.unpack_from("<I", data, offset + size + 1)
    if tfrecord_io.masked_crc32c(block) != crc:
        raise ValueError(f"block CRC mismatch at offset {offset}")
    if block[-1] == 1:
        raise ValueError(
            "a snappy-compressed block, which TensorFlow never writes in a "
            "checkpoint index"
        )
    if block[-1] != 0:
        raise ValueError(f"unknown block compression type {block[-1]}")
    return block[:-1]


def _read_table(data):
    """Every (key, value) of a table file's bytes, in key order."""
    if len(data) < _FOOTER_SIZE:
        raise ValueError(f"{len(data)} bytes, shorter than a table footer")
    limit = len(data) - _FOOTER_SIZE
    footer = data[limit:]
    if struct.unpack_from("<Q", footer, 40)[0] != _TABLE_MAGIC:
        raise ValueError("no table magic number at its end")
    _, pos = _read_varint(footer, 0)  # The (empty) metaindex block.
    _, pos = _read_varint(footer, pos)
    entries = []
    index = _read_block(data, footer[pos:40], limit)
    for _, handle in _block_entries(index):
        entries += _block_entries(_read_block(data, handle, limit))
    keys = [key for key, _ in entries]
    if any(a >= b for a, b in zip(keys, keys[1:])):
        raise ValueError("keys out of order")
    return entries


class _BlockBuilder:
    """One block as table_builder.cc's BlockBuilder lays it out."""

    def __init__(self, restart_interval):
        self.interval = restart_interval
        self.buffer = bytearray()
        self.restarts = [0]
        self.count = 0
        self.last_key = b""

    def add(self, key, value):
        shared = 0
        if self.count < self.interval:
            limit = min(len(key), len(self.last_key))
            while shared < limit and key[shared] == self.last_key[shared]:
                shared += 1
        else:
            self.restarts.append(len(self.buffer))
            self.count = 0
        self.buffer += _varint(shared) + _varint(len(key) - shared)
        self.buffer += _varint(len(value)) + key[shared:] + value
        self.last_key = key
        self.count += 1

    def size_estimate(self):
        return len(self.buffer) + 4 * len(self.restarts) + 4

    def finish(self):
        restarts = struct.pack(f"<{len(self.restarts)}I", *self.restarts)
        return (
            bytes(self.buffer)
            + restarts
            + struct.pack("<I", len(restarts) // 4)
        )


def _append_block(out, contents):
    """Appends a block and its trailer (uncompressed); its handle's bytes."""
    handle = _varint(len(out)) + _varint(len(contents))
    typed = contents + b"\x00"
    out += typed + struct.pack("<I", tfrecord_io.masked_crc32c(typed))
    return handle


def _separator(start, limit):
    """A short key >= start and < limit (LevelDB's bytewise
    FindShortestSeparator): the first differing byte of `start` plus one,
    when that stays below `limit`'s."""
    n = 0
    while n < min(len(start), len(limit)) and start[n] == limit[n]:
        n += 1
    if n < min(len(start), len(limit)) and start[n] < 0xFF:
        if start[n] + 1 < limit[n]:
            return start[:n] + bytes([start[n] + 1])
    return start


def _successor(key):
    """A short key >= `key` (FindShortSuccessor): its first byte that is
    not 0xff plus one."""
    for n, byte in enumerate(key):
        if byte != 0xFF:
            return key[:n] + bytes([byte + 1])
    return key


def _build_table(entries):
    """A table file's bytes from (key, value) pairs in strictly increasing
    key order: data blocks, an empty metaindex block, the index, footer."""
    out, index = bytearray(), _BlockBuilder(1)
    block, pending, last = _BlockBuilder(_RESTART_INTERVAL), None, b""
    for key, value in entries:
        if pending is not None:
            index.add(_separator(last, key), pending)
            pending = None
        block.add(key, value)
        last = key
        if block.size_estimate() >= _BLOCK_SIZE:
            pending = _append_block(out, block.finish())
            block = _BlockBuilder(_RESTART_INTERVAL)
    if block.count:
        pending = _append_block(out, block.finish())
    metaindex = _append_block(out, _BlockBuilder(_RESTART_INTERVAL).finish())
    if pending is not None:
        index.add(_successor(last), pending)
    handles = metaindex + _append_block(out, index.finish())
    out += handles.ljust(40, b"\x00") + struct.pack("<Q", _TABLE_MAGIC)
    return bytes(out)


# === Reading ===


# A BundleEntryProto's fields; `crc` is the masked CRC-32C of the bytes.
_Entry = collections.namedtuple("_Entry", "dtype shape shard offset size crc")


class _Unsupported(ValueError):
    """A valid index this reader cannot read (not a damaged one)."""


def _sliced_first(entry):
    """0 for a partitioned tensor's entry (it lists its slices, field 7), 1
    for one of its slices (their keys start with a 0 byte), 2 for the rest:
    the error then names the tensor, not a slice's encoded key."""
    key, fields = entry
    return 0 if 7 in fields else 1 if key.startswith(b"\x00") else 2


class BundleReader:
    """A checkpoint's index, read once; tensors read on demand.

    Attributes:
        prefix: str, the checkpoint prefix.
        names: sorted list of the tensor names.
        shapes: {name: tuple of int}.
        dtypes: {name: str}, numpy's dtype names ("float32", "bfloat16",
            "int64", ...; "string" and the like for what get_tensor cannot
            read).
    """

    def __init__(self, prefix):
        self.prefix = os.fspath(prefix)
        index = self.prefix + ".index"
        data = file_io.read_bytes(index)
        try:
            entries = _read_table(data)
            if not entries or entries[0][0] != b"":
                raise ValueError("no header entry")
            self._header(parse_message(entries[0][1]))
            parsed = [(k, parse_message(v)) for k, v in entries[1:]]
            self._entries = {}
            for key, fields in sorted(parsed, key=_sliced_first):
                self._add_entry(key, fields)
        except _Unsupported as e:
            raise ValueError(f"{index}: {e}") from None
        except (ValueError, IndexError, TypeError, struct.error) as e:
            # TypeError: a field of another wire type than its own (a
            # number where a message goes).
            raise ValueError(
                f"{index} is not a readable checkpoint index (truncated or "
                f"corrupt): {e}"
            ) from None
        self.names = sorted(self._entries)
        self.shapes = {n: e.shape for n, e in self._entries.items()}
        self.dtypes = {
            n: _DTYPE_NAMES.get(e.dtype, f"DataType {e.dtype}")
            for n, e in self._entries.items()
        }

    def _header(self, fields):
        self.num_shards = _last(fields, 1)
        # BundleHeaderProto.Endianness: LITTLE = 0, BIG = 1.
        self._byte_order = ">" if _last(fields, 2) == 1 else "<"
        version = parse_message(_last(fields, 3, b""))
        if _last(version, 2) > _READER_VERSION or _READER_VERSION in (
            version.get(3, [])
        ):
            raise ValueError(
                f"format version {_last(version, 1)} needs a newer reader"
            )
        if self.num_shards < 1:
            raise ValueError(f"{self.num_shards} data shards")

    def _add_entry(self, key, fields):
        name = key.decode("utf-8", "backslashreplace")
        if _sliced_first((key, fields)) < 2:
            raise _Unsupported(
                f"tensor {name!r} is partitioned (saved in slices), which "
                "this reader does not support: re-save it unpartitioned"
            )
        shape_fields = parse_message(_last(fields, 2, b""))
        if _last(shape_fields, 3):
            raise ValueError(f"tensor {name!r} has an unknown rank")
        shape = tuple(
            _last(parse_message(dim), 1) for dim in shape_fields.get(2, [])
        )
        if any(size >= 1 << 63 for size in shape):  # -1 as a varint
            raise ValueError(f"tensor {name!r} has an unknown dimension")
        entry = _Entry(
            _last(fields, 1), shape, *(_last(fields, n) for n in (3, 4, 5, 6))
        )
        if entry.shard >= self.num_shards:
            raise ValueError(f"tensor {name!r} in shard {entry.shard}")
        self._entries[key.decode("utf-8")] = entry

    def get_variable_to_shape_map(self):
        """{name: list of int}, as tf.train.load_checkpoint's reader."""
        return {name: list(shape) for name, shape in self.shapes.items()}

    def get_tensor(self, name):
        """The tensor `name` as a new (writable) np.ndarray.

        Raises:
            KeyError: no tensor of that name.
            FileNotFoundError: its data shard is missing.
            ValueError: one line naming the data file: truncated, CRC
                mismatch, or a dtype numpy cannot hold.
        """
        entry = self._entries[name]
        shape, offset, size = entry.shape, entry.offset, entry.size
        path = data_filename(self.prefix, entry.shard, self.num_shards)
        dtype = self._numpy_dtype(name, path)
        expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        if size != expected:
            raise ValueError(
                f"{path}: the index gives tensor {name!r} {size} bytes, not "
                f"the {expected} of {self.dtypes[name]}{list(shape)} "
                "(corrupt index)"
            )
        data = file_io.read_bytes(path, offset, size)
        if len(data) != size:
            raise ValueError(
                f"{path} is truncated: tensor {name!r} needs {size} bytes at "
                f"offset {offset}, the file has {len(data)} there"
            )
        if tfrecord_io.masked_crc32c(data) != entry.crc:
            raise ValueError(
                f"{path} is corrupt: the bytes of tensor {name!r} fail "
                "their CRC-32C check"
            )
        array = np.frombuffer(data, dtype.newbyteorder(self._byte_order))
        return array.astype(dtype).reshape(shape)

    def _numpy_dtype(self, name, path):
        dtype_name = self.dtypes[name]
        if dtype_name == "bfloat16":
            try:
                import ml_dtypes
            except ImportError:
                raise ValueError(
                    f"{path}: tensor {name!r} is bfloat16, which needs the "
                    "ml_dtypes package (pip install ml_dtypes)"
                ) from None
            return np.dtype(ml_dtypes.bfloat16)
        if dtype_name in _NOT_NUMPY or dtype_name not in _DTYPE_ENUMS:
            raise ValueError(
                f"{path}: tensor {name!r} is of dtype {dtype_name}, which "
                "this reader does not support"
            )
        return np.dtype(dtype_name)


def read(prefix):
    """Opens the checkpoint `prefix`: its index is read, no tensor is.

    Raises:
        FileNotFoundError: `<prefix>.index` does not exist.
        ValueError: one line naming the index: truncated or corrupt, a newer
            format, or a partitioned (sliced) tensor.
    """
    return BundleReader(prefix)


# === Writing ===


def _as_array(value, name):
    # Keras and TF variables and eager tensors have .numpy(); jax and numpy
    # arrays convert directly.
    if hasattr(value, "numpy"):
        value = value.numpy()
    array = np.asarray(value)
    if array.dtype.name not in _DTYPE_ENUMS or array.dtype.name in _NOT_NUMPY:
        raise ValueError(
            f"Cannot write tensor {name!r} of dtype {array.dtype} to a "
            "checkpoint"
        )
    # Little-endian, C order: the bytes as TensorFlow holds them.
    return np.asarray(array, array.dtype.newbyteorder("<"), order="C")


def _entry_proto(array, offset, size, crc):
    """BundleEntryProto{dtype, shape, shard_id: 0, offset, size, crc32c}."""
    dims = b"".join(_message_field(2, _int_field(1, d)) for d in array.shape)
    return (
        _int_field(1, _DTYPE_ENUMS[array.dtype.name])
        + _message_field(2, dims)
        + _int_field(4, offset)
        + _int_field(5, size)
        + (b"\x35" + struct.pack("<I", crc) if crc else b"")  # fixed32 6
    )


def write(prefix, tensors):
    """Writes `<prefix>.data-00000-of-00001` and then `<prefix>.index`.

    Both files are written under temporary names, synced to disk and
    renamed into place together (file_io.atomic_writes, which syncs them
    and the folder), the index, which marks a checkpoint present, last. Tensors are converted and written one at a time, in sorted name
    order, so memory holds one tensor's bytes beyond the values given.

    Args:
        prefix: str, e.g. ".../model.ckpt-1000".
        tensors: dict {name: np.ndarray, or anything np.asarray converts: a
            keras / tf Variable, a tf Tensor, a jax array}.

    Raises:
        ValueError: an empty name or a dtype a checkpoint cannot hold.
        OSError: from the writes (a full disk: errno ENOSPC).
    """
    prefix = os.fspath(prefix)
    keys = sorted((name.encode("utf-8"), name) for name in tensors)
    if keys and not keys[0][0]:
        raise ValueError("A checkpoint tensor name cannot be empty")
    data_file = data_filename(prefix, 0, 1)
    entries, offset = [(b"", _HEADER)], 0
    # Both files published as one (the index, which marks a checkpoint
    # present, last), on disk first: a rewrite of an existing prefix that
    # fails leaves the old checkpoint whole, and a power cut after an older
    # checkpoint is pruned cannot leave this one empty.
    finals = [data_file, prefix + ".index"]
    with file_io.atomic_writes(finals, "wb", follow_links=False) as (f, index):
        for key, name in keys:
            array = _as_array(tensors[name], name)
            data = array.tobytes()
            f.write(data)
            crc = tfrecord_io.masked_crc32c(data)
            entries.append((key, _entry_proto(array, offset, len(data), crc)))
            offset += len(data)
            del data
        index.write(_build_table(entries))
