"""Rows of the files people have: CSV, TSV and JSON Lines, streamed.

One module, over 500 lines: every script reads a user's table through it, so
its rules (formats, columns, ids, the line an error names) hold in one place.

`--task_name=custom` (run_classifier), run_ner's JSON Lines and every
`--do_predict` on a user's file read their rows here. The format comes from
the extension:

  .csv         RFC 4180: a header row, fields quoted with `"` when they hold
               commas, quotes (doubled) or line breaks.
  .tsv         a header row, then tab-separated fields, no quoting (quote
               characters are text), as the GLUE files are read.
  .jsonl .json one JSON object per line (blank lines skipped); a `.json`
               file holding one JSON array of objects is read too (whole,
               not streamed).

A UTF-8 byte-order mark is ignored. Rows are read one at a time, so a file of
a million rows costs the memory of one row. Every row carries the line it
starts on (CSV fields may span lines), and every error names the file and
that line.

A bad row (a ragged CSV/TSV row, a malformed JSON line, a JSON value that is
not an object) is reported to a `BadRows`: an error by default, or with
`--skip_bad_rows` counted, logged and skipped. A CSV quote left open, which
reads on over the following lines, is always an error: skipping it would
skip the rows it swallowed.

No TensorFlow: a remote path (gs://) loads it only to open the file.
"""

import csv
import io
import json
import os
import sys

from absl import logging

from modeling import task_kinds
from modeling.data import file_io
from modeling.text import tokenization

# Extension -> format.
FORMATS = {".csv": "csv", ".tsv": "tsv", ".jsonl": "jsonl", ".json": "jsonl"}
# How many skipped rows are logged one by one (then only counted).
_LOGGED_BAD_ROWS = 10

# CSV fields may be long (a document per row): the csv module's default
# limit of 128 KB per field would reject them.
csv.field_size_limit(min(sys.maxsize, 2**31 - 1))


def file_format(path):
    """ "csv", "tsv" or "jsonl", from the file's extension.

    Raises:
      ValueError: another extension, naming the file and the known ones.
    """
    extension = os.path.splitext(os.fspath(path))[1].lower()
    if extension not in FORMATS:
        raise ValueError(
            f"{path}: unknown file kind {extension or '(no extension)'!r}; "
            f"expected one of {', '.join(FORMATS)}"
        )
    return FORMATS[extension]


class BadRows:
    """What to do with a bad row: raise (the default), or with `skip` count
    it, log the first few and go on.

    Attributes:
      skip: bool.
      quiet: count without logging (a file checked before it is read).
      count: the rows skipped so far.
    """

    def __init__(self, skip=False, quiet=False):
        self.skip = skip
        self.quiet = quiet
        self.count = 0

    def report(self, where, message):
        """A bad row at `where` ("<file> line N").

        Raises:
          ValueError: `<where>: <message>`, unless skipping.
        """
        if not self.skip:
            raise ValueError(f"{where}: {message}")
        self.count += 1
        if self.quiet:
            return
        if self.count <= _LOGGED_BAD_ROWS:
            logging.warning("Skipping a bad row: %s: %s", where, message)
        if self.count == _LOGGED_BAD_ROWS:
            logging.warning("Not logging further bad rows (only counting)")

    def log_summary(self, what):
        """Logs how many rows were skipped in `what` (a file name)."""
        if self.count and not self.quiet:
            logging.warning("Skipped %d bad row(s) of %s", self.count, what)


# The keys of the JSON files read in this process, by `_file_stamp`.
_JSON_KEYS = {}


def _file_stamp(path):
    """(real path, size, modification time) of a local file, which changes
    when the file does; None for a remote one (scanned each time)."""
    if file_io.is_remote(path):
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    return os.path.realpath(path), st.st_size, st.st_mtime_ns


class TableFile:
    """A CSV, TSV or JSON Lines file: its columns and its rows.

    Args:
      path: str (local or gs://).
      bad_rows: a BadRows; None: bad rows are errors.
      format: "csv", "tsv" or "jsonl"; None: from the extension.

    Raises:
      FileNotFoundError: naming the file.
      ValueError: an unknown extension.
    """

    def __init__(self, path, bad_rows=None, format=None):  # noqa: A002
        self.path = os.fspath(path)
        self.format = format or file_format(self.path)
        self.bad_rows = bad_rows or BadRows()
        if not file_io.exists(self.path):
            raise FileNotFoundError(f"Data file not found: {self.path}")
        self._array = None  # Whether a .json file holds one JSON array.
        self._columns = None

    def where(self, line):
        """ "<file> line N" (a JSON array's: "<file> item N")."""
        unit = "item" if self._is_array() else "line"
        return f"{self.path} {unit} {line}"

    @property
    def columns(self):
        """The header's names (CSV/TSV), or every key of the file's objects
        in the order they first appear (JSON: a row's fields are its own;
        one pass over the file); [] for a file without any.

        Raises:
          ValueError: a header that names a column twice.
        """
        if self._columns is None:
            self._columns = self._read_columns()
        return list(self._columns)

    def _read_columns(self):
        if self.format != "jsonl":
            header, _ = self._header()
            return header or []
        # Every object's keys: a key the first rows lack is still a column
        # (its sentence2 or id was silently dropped). Bad rows are
        # reported once, when the rows are read. One pass over the file
        # (about 40 MB/s), once a process: the scripts' checks and their
        # reads of one file share it.
        stamp = _file_stamp(self.path)
        if stamp is not None and stamp in _JSON_KEYS:
            return list(_JSON_KEYS[stamp])
        checking = BadRows(skip=True, quiet=True)
        bad_rows, self.bad_rows = self.bad_rows, checking
        keys = {}
        try:
            for _, values in self.rows():
                keys.update(dict.fromkeys(values))
        finally:
            self.bad_rows = bad_rows
        if keys:
            if stamp is not None:
                if len(_JSON_KEYS) >= 64:
                    _JSON_KEYS.clear()
                _JSON_KEYS[stamp] = list(keys)
            return list(keys)
        if checking.count and not self.bad_rows.skip:
            # No row is an object: the first bad row's error, rather than
            # "an empty file".
            for _ in self.rows():
                pass
        return []

    def rows(self):
        """The rows in file order.

        Yields:
          (line, dict column -> value): the 1-based line (item) the row
          starts on; CSV/TSV values are str, JSON values as parsed.

        Raises:
          ValueError: naming the file and line: bytes that are not UTF-8,
            a bad row (unless the BadRows skips it).
        """
        if self.format == "jsonl":
            yield from self._json_rows()
        else:
            yield from self._delimited_rows()

    def lines_of_fields(self, quotechar=None):
        """Every line's fields as a list of str, the header and blank lines
        ([]) included, no column checks (CSV/TSV): how the GLUE
        processors read their .tsv files (`quotechar`: a TSV's quoted
        fields are read as the csv module reads them, as the original's
        `_read_tsv(input_file, quotechar)`; None: quotes are text).

        Raises:
          ValueError: naming the file and line: bytes that are not UTF-8,
            a carriage return inside a line (the csv module's error).
        """
        reader = self._reader(self._text_lines(), quotechar)
        for fields, error in _rows_and_errors(reader):
            if error is not None:
                raise ValueError(f"{self.where(reader.line_num)}: {error}")
            yield fields

    def count_lines(self):
        """The number of non-empty lines (a fast binary count: an estimate
        of the rows where CSV fields span lines)."""
        count, last = 0, b"\n"
        with self._open() as f:
            while chunk := f.read(1 << 20):
                count += chunk.count(b"\n") - chunk.count(b"\n\n")
                last = chunk[-1:]
        return count + (last != b"\n")

    # === CSV / TSV ===

    def _reader(self, lines, quotechar=None):
        if self.format == "tsv" and quotechar is not None:
            return csv.reader(lines, delimiter="\t", quotechar=quotechar)
        if self.format == "tsv":
            # QUOTE_NONE: quotes stay literal text, as the GLUE files read.
            return csv.reader(lines, delimiter="\t", quoting=csv.QUOTE_NONE)
        return csv.reader(lines, strict=True)

    def _header(self):
        """(header names or None, the reader positioned after them)."""
        reader = self._reader(self._text_lines())
        for row, error in _rows_and_errors(reader):
            if error is not None:
                hint = (
                    " (do its lines end in a lone carriage return, as old Mac "
                    "files? save it with \\n or \\r\\n line ends)"
                    if "new-line character" in str(error)
                    else ""
                )
                raise ValueError(
                    f"{self.where(reader.line_num)}: not CSV: {error}{hint}"
                )
            if row:  # Blank lines before the header are skipped.
                if len(set(row)) != len(row):
                    twice = sorted({c for c in row if row.count(c) > 1})
                    hint = (
                        " (empty names: does the header end in separators, "
                        "as a spreadsheet's export can?)"
                        if "" in twice
                        else ""
                    )
                    raise ValueError(
                        f"{self.where(reader.line_num)}: the header names "
                        f"column(s) {twice} more than once{hint}"
                    )
                return row, reader
        return None, reader

    def _delimited_rows(self):
        header, reader = self._header()
        if header is None:
            return
        kind = "tab-separated" if self.format == "tsv" else "comma-separated"
        start = reader.line_num + 1
        for fields, e in _rows_and_errors(reader):
            if e is not None:
                if reader.line_num > start:
                    # A quoted field left open reads on over the next lines
                    # (to the end of the file, or to a quote that closes it
                    # out of place): the rows it took are lost, so this is
                    # an error even with --skip_bad_rows.
                    raise ValueError(
                        f"{self.where(start)}: not CSV: a quoted field "
                        f"opened in this row is not closed where it should "
                        f"be (read on to line {reader.line_num}: {e})"
                    ) from None
                # One line (e.g. a quote inside an unquoted field): the
                # reader goes on with the next line.
                self.bad_rows.report(self.where(start), f"not CSV: {e}")
                start = reader.line_num + 1
                continue
            line, start = start, reader.line_num + 1
            if not fields:  # A blank line.
                continue
            if len(fields) != len(header):
                self.bad_rows.report(
                    self.where(line),
                    f"expected {len(header)} {kind} fields (as the header), "
                    f"found {len(fields)}",
                )
                continue
            yield line, dict(zip(header, fields))

    def _text_lines(self):
        """The file's lines as str (line ends kept, as csv wants them),
        decoded one at a time so that an error names its line."""
        return file_io.text_lines(self.path)

    def _open(self):
        if file_io.is_remote(self.path):
            return file_io._gfile().GFile(self.path, "rb")
        return open(self.path, "rb")  # noqa: SIM115 (a context manager)

    # === JSON ===

    def _is_array(self):
        """Whether this is a .json file holding one JSON array."""
        if self.format != "jsonl" or not self.path.lower().endswith(".json"):
            return False
        if self._array is None:
            with self._open() as f:
                head = f.read(4096).lstrip(b"\xef\xbb\xbf").lstrip()
            self._array = head.startswith(b"[")
        return self._array

    def _json_rows(self):
        values = (
            self._json_array_values()
            if self._is_array()
            else self._json_line_values()
        )
        for number, value in values:
            if not isinstance(value, dict):
                self.bad_rows.report(
                    self.where(number),
                    f"expected a JSON object, found {type(value).__name__}",
                )
                continue
            yield number, value

    def _json_line_values(self):
        for number, line in enumerate(self._text_lines(), start=1):
            if not line.strip():
                continue
            try:
                yield number, json.loads(line, object_pairs_hook=_unique_keys)
            except json.JSONDecodeError as e:
                self.bad_rows.report(
                    self.where(number), f"not a JSON object: {e.msg}"
                )
            except _RepeatedKey as e:
                self.bad_rows.report(self.where(number), str(e))
            except (ValueError, RecursionError) as e:
                # A number past Python's digit limit, nesting too deep.
                self.bad_rows.report(
                    self.where(number), f"not a JSON object: {_first_line(e)}"
                )

    def _json_array_values(self):
        text = "".join(self._text_lines())
        try:
            items = json.load(io.StringIO(text), object_pairs_hook=_unique_keys)
        except json.JSONDecodeError as e:
            raise ValueError(
                f"{self.path} line {e.lineno}: not JSON: {e.msg}"
            ) from None
        except _RepeatedKey as e:
            raise ValueError(f"{self.path}: {e}") from None
        except (ValueError, RecursionError) as e:
            raise ValueError(
                f"{self.path}: not JSON: {_first_line(e)}"
            ) from None
        yield from enumerate(items, start=1)


def _first_line(error):
    return str(error).splitlines()[0] if str(error) else type(error).__name__


class _RepeatedKey(ValueError):
    pass


def _unique_keys(pairs):
    """A JSON object's dict, refusing a key given twice (json keeps the
    last silently; a CSV header naming a column twice is an error too)."""
    out = {}
    for key, value in pairs:
        if key in out:
            raise _RepeatedKey(f"the key {key!r} appears twice in one object")
        out[key] = value
    return out


def _rows_and_errors(reader):
    """A csv reader's rows as (fields, None), and each row it cannot read
    as (None, the csv.Error): the reader goes on with the next line."""
    while True:
        try:
            yield next(reader), None
        except StopIteration:
            return
        except csv.Error as e:
            yield None, e


def find_column(table, flag, value, defaults=(), required=True):
    """The column a flag names, or the first of `defaults` the file has.

    Args:
      table: a TableFile.
      flag: the flag's name, for messages ("text_a_column"), or None.
      value: the flag's value, or None.
      defaults: names tried in order when `value` is None.
      required: whether a missing column is an error.

    Returns:
      The column name, or None (not required and absent).

    Raises:
      ValueError: naming the file, the column(s) looked for and the
        columns found.
    """
    columns = table.columns
    names = [value] if value else list(defaults)
    for name in names:
        if name in columns:
            return name
    if not required:
        return None
    if value:
        wanted = f"no column {value!r}" + (f" (--{flag})" if flag else "")
    else:
        wanted = f"none of the columns {names} (set --{flag})"
    spaced = [c for c in columns if c != c.strip()]
    hint = (
        f" (names with spaces around them: {spaced}; the header's names are "
        "read as written)"
        if spaced
        else ""
    )
    raise ValueError(
        f"{table.path} has {wanted}; its columns are {columns}{hint}"
    )


def row_id(row, column, seen):
    """A row's id: its `column` value as a str (task_kinds.label_text).

    The one rule for ids read from a file (run_classifier's, the embedding
    scripts'): present, a single value, one line (an id is a line of
    ids.txt, a field of test_results), and not an earlier row's (`seen`:
    the ids read so far, or None: ids may repeat; the caller adds this one).

    Raises:
      ValueError: the reason, naming the column (the caller names the line).
    """
    value = row.get(column)
    index = None
    if not isinstance(value, (dict, list)):
        index = task_kinds.label_text(value)
    if index is None:
        raise ValueError(f"no id in column {column!r}: {value!r}")
    if "\n" in index or "\r" in index:
        raise ValueError(f"id {index!r} (column {column!r}) holds a line break")
    if seen is not None and index in seen:
        raise ValueError(f"id {index!r} (column {column!r}) is used twice")
    return index


# Column names TextFile looks for, in order, when no text or id column is
# given.
TEXT_COLUMNS = ("text", "sentence", "text_a", "sentence1", "query")
ID_COLUMNS = ("id", "idx", "index", "guid")


class TextFile:
    """The texts of a file: .txt (one per line, its line number the id) or
    CSV / TSV / JSON Lines (--text_column, else the first of TEXT_COLUMNS;
    --id_column, else the first of ID_COLUMNS, else the row's line number).

    Raises (when read):
      ValueError: naming the file and line: an empty text, a missing
        column, no text at all.
    """

    def __init__(
        self,
        path,
        text_column=None,
        id_column=None,
        text_flag="text_column",
        warn=True,
    ):
        self.path = path
        self.text_column = text_column
        self.id_column = id_column
        self.is_text = path.lower().endswith(".txt")
        if not self.is_text:
            self.table = TableFile(path)
            # `text_flag`: how the running script names the column's flag.
            self.text_column = find_column(
                self.table, text_flag, text_column, TEXT_COLUMNS
            )
            self.id_column = find_column(
                self.table,
                "id_column",
                id_column,
                ID_COLUMNS,
                required=bool(id_column),
            )
            # A column found by its name, not given: a row without a value
            # there is numbered by its line, and ids may repeat (a
            # document's passages), each with a warning.
            self._id_given = bool(id_column)
        # Each warning once per file, not once per pass over it; none with
        # warn=False (a check before the pass that reads the file).
        self._warned = set() if warn else {"missing", "repeated"}

    def rows(self):
        """Yields (id, text)."""
        if self.is_text:
            # Streamed: memory for one line (a corpus may be gigabytes).
            lines = file_io.text_lines(self.path, keep_ends=False)
            for number, text in enumerate(lines, 1):
                if tokenization.is_empty_text(text):
                    raise ValueError(f"{self.path}:{number}: empty text")
                yield str(number), text
            return
        ids, warned = set(), self._warned
        for line, row in self.table.rows():
            where = self.table.where(line)
            text = row.get(self.text_column)
            if not isinstance(text, str) or tokenization.is_empty_text(text):
                raise ValueError(
                    f"{where}: empty or missing {self.text_column!r}"
                )
            if self.id_column is None:
                yield str(line), text
                continue
            if not self._id_given and row.get(self.id_column) in (None, ""):
                if "missing" not in warned:
                    warned.add("missing")
                    logging.warning(
                        "%s: no %r value: rows without one are numbered by "
                        "their line (given as --id_column, every row needs "
                        "one)",
                        where,
                        self.id_column,
                    )
                yield str(line), text
                continue
            try:
                index = row_id(
                    row, self.id_column, ids if self._id_given else None
                )
            except ValueError as e:
                raise ValueError(f"{where}: {e}") from None
            if index in ids and "repeated" not in warned:
                warned.add("repeated")
                logging.warning(
                    "%s: id %r repeats an earlier row's, as the outputs "
                    "will (given as --id_column, ids must be unique)",
                    where,
                    index,
                )
            ids.add(index)
            yield index, text

    def count(self):
        """The number of texts (a first pass over the file: the .npy's
        shape is known before any is embedded)."""
        total = sum(1 for _ in self.rows())
        if not total:
            raise ValueError(f"{self.path}: no texts")
        return total
