"""TFRecord files written without TensorFlow, and a minimal Example reader.

A TFRecord file is a sequence of frames: the record length as a
little-endian uint64, the masked CRC-32C of those 8 bytes, the record, the
masked CRC-32C of the record (both CRCs little-endian uint32). Writing that
takes a CRC-32C, not TensorFlow (seconds to import): `google_crc32c` computes
it in C with the CPU's CRC instructions. Remote paths (gs://...) and a
missing C extension fall back to tf.io.TFRecordWriter; the bytes are the same
(tests compare them).
"""

import os
import struct

from modeling.data import file_io

_MASK_DELTA = 0xA282EAD8


def _crc32c_module():
    try:
        import google_crc32c
    except ImportError:
        return None
    # Its pure-Python fallback is far too slow for record data.
    return google_crc32c if google_crc32c.implementation == "c" else None


_CRC32C = _crc32c_module()


def masked_crc32c(data):
    """TFRecord's masked CRC-32C of bytes (google_crc32c must be in C)."""
    crc = _CRC32C.value(data)
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


def frame(record):
    """The bytes of one record as a TFRecord file stores it."""
    header = struct.pack("<Q", len(record))
    return b"".join(
        (
            header,
            struct.pack("<I", masked_crc32c(header)),
            record,
            struct.pack("<I", masked_crc32c(record)),
        )
    )


class _LocalWriter:
    """Buffered TFRecord writer for a local path (the tf.io API subset)."""

    def __init__(self, path, buffer_bytes=1 << 22):
        self._file = open(path, "wb")  # noqa: SIM115 (closed in close())
        self._parts = []
        self._size = 0
        self._buffer_bytes = buffer_bytes

    def write(self, record):
        self._parts.append(frame(record))
        self._size += len(record) + 16
        if self._size >= self._buffer_bytes:
            self.flush()

    def flush(self):
        self._file.write(b"".join(self._parts))
        self._parts, self._size = [], 0

    def close(self):
        if self._file.closed:
            return
        try:
            self.flush()
        finally:
            # Closed even when the flush fails (a full disk): a second
            # close() is then a no-op instead of the same error again.
            self._file.close()


def open_writer(path):
    """A TFRecord writer (write/flush/close) for a local or remote path."""
    if file_io.is_remote(path) or _CRC32C is None:
        import tensorflow as tf

        return tf.io.TFRecordWriter(str(path))
    return _LocalWriter(path)


# === Reading serialized tf.train.Examples (for logging) ===


def _varint(data, pos):
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def _fields(data):
    """Yields (field number, wire type, value) of a protobuf message.

    The value is an int (varint), the bytes of a length-delimited field, or
    the 4 / 8 raw bytes of a fixed-width one.
    """
    pos = 0
    while pos < len(data):
        tag, pos = _varint(data, pos)
        wire = tag & 7
        if wire == 0:
            value, pos = _varint(data, pos)
        elif wire in (1, 2, 5):
            if wire == 2:
                size, pos = _varint(data, pos)
            else:
                size = 8 if wire == 1 else 4
            if pos + size > len(data):
                raise ValueError("a protobuf field runs past the record")
            value, pos = data[pos : pos + size], pos + size
        else:
            raise ValueError(f"unexpected protobuf wire type {wire}")
        yield tag >> 3, wire, value


def _signed(value):
    return value - (1 << 64) if value >= 1 << 63 else value


def _list_values(kind, field):
    """The values of one `value` field of a BytesList / FloatList /
    Int64List: packed (one length-delimited run) or one unpacked value."""
    number, wire, data = field
    if number != 1:
        return []
    if kind == 1:  # bytes_list: each value is one field.
        return [data]
    if kind == 2:  # float_list
        if wire == 5:
            return list(struct.unpack("<f", data))
        if wire != 2 or len(data) % 4:
            raise ValueError("a float list that is not whole floats")
        return list(struct.unpack(f"<{len(data) // 4}f", data))
    if wire == 0:  # int64_list, unpacked
        return [_signed(data)]
    values, pos = [], 0
    while pos < len(data):
        value, pos = _varint(data, pos)
        values.append(_signed(value))
    return values


def parse_example(record):
    """A serialized tf.train.Example -> dict name -> list of values.

    Int64 and float lists as int / float, bytes lists as bytes; packed or
    unpacked encodings, as TensorFlow's parser reads them. Not a general
    protobuf parser: what the record checks and the logs need.
    """
    out = {}
    for _, features in _messages(record):  # Example.features
        for _, entry in _messages(features):  # Features.feature map entry
            name, values = "", []  # protobuf's defaults
            for number, payload in _messages(entry):
                if number == 1:
                    name = payload.decode("utf-8")
                    continue
                for kind, lists in _messages(payload):  # Feature oneof
                    values = []
                    for field in _fields(lists):
                        values.extend(_list_values(kind, field))
            out[name] = values
    return out


def _messages(data):
    """(field number, bytes) of a message whose fields are all messages or
    strings, as every level of a tf.train.Example above its value lists.

    Raises:
      ValueError: a number or fixed-width field there (not an Example).
    """
    for number, wire, value in _fields(data):
        if wire != 2:
            raise ValueError(
                f"not a tf.train.Example (field {number} has wire type "
                f"{wire} where a message is)"
            )
        yield number, value


# === Reading TFRecord files (the input checks before training) ===

# A record longer than this is taken as a sign that the file is not a
# TFRecord file (the length field holds whatever bytes the file starts with).
_MAX_RECORD_BYTES = 1 << 30


def _open_binary(path):
    if file_io.is_remote(path):
        import tensorflow as tf

        return tf.io.gfile.GFile(path, "rb")
    return open(path, "rb")  # noqa: SIM115 (closed by the caller)


def _read_exactly(f, size):
    data = f.read(size)
    return data if len(data) == size else None


def read_records(path, limit=None, check_crc=True):
    """Yields up to `limit` records of a TFRecord file (all when None).

    Raises:
      ValueError: naming the file and the byte offset: not a TFRecord file,
        a damaged frame (CRC mismatch) or a truncated last record.
    """
    verify = check_crc and _CRC32C is not None
    with _open_binary(path) as f:
        offset = count = 0
        while limit is None or count < limit:
            header = f.read(12)
            if not header:
                return
            if len(header) < 12:
                raise ValueError(_truncated(path, offset))
            (length,) = struct.unpack("<Q", header[:8])
            (header_crc,) = struct.unpack("<I", header[8:])
            if (verify and masked_crc32c(header[:8]) != header_crc) or (
                length > _MAX_RECORD_BYTES
            ):
                raise ValueError(_damaged(path, offset, header))
            body = _read_exactly(f, length + 4)
            if body is None:
                raise ValueError(_truncated(path, offset))
            record = body[:length]
            (data_crc,) = struct.unpack("<I", body[length:])
            if verify and masked_crc32c(record) != data_crc:
                raise ValueError(_damaged(path, offset))
            yield record
            offset += 12 + length + 4
            count += 1


def check_framing(path):
    """Walks the frame headers of a local TFRecord file (cheap: one seek per
    record, no CRC of the data); returns the number of records.

    Raises:
      ValueError: not a TFRecord file, or the file ends inside a record
        (a copy or a write that was cut short), naming file and offset.
    """
    size = os.path.getsize(path)
    offset = count = 0
    with open(path, "rb") as f:
        while offset < size:
            header = _read_exactly(f, 12)
            if header is None:
                raise ValueError(_truncated(path, offset))
            (length,) = struct.unpack("<Q", header[:8])
            if (
                _CRC32C is not None
                and masked_crc32c(header[:8])
                != struct.unpack("<I", header[8:])[0]
            ):
                raise ValueError(_damaged(path, offset, header))
            if offset + 16 + length > size:
                raise ValueError(_truncated(path, offset))
            offset += 16 + length
            f.seek(offset)
            count += 1
    return count


def _truncated(path, offset):
    return (
        f"{path} is truncated: the record at byte {offset} is cut short (an "
        "interrupted copy or write?); regenerate or re-copy the file"
    )


def _damaged(path, offset, header=b""):
    hint = ""
    if offset == 0 and header.startswith(b"\x1f\x8b"):
        hint = ": it is gzip-compressed, decompress it first (gunzip)"
    elif (
        offset == 0
        and header
        and all(32 <= byte < 127 or byte in b"\t\r\n" for byte in header)
    ):
        hint = (
            f": it starts with text ({header.decode()!r}...), not records "
            "(a corpus is read by create_pretraining_data.py, or by "
            "run_pretraining.py --input_format=text)"
        )
    return (
        f"{path} is not a TFRecord file or is damaged (bad record frame at "
        f"byte {offset}){hint}"
    )
