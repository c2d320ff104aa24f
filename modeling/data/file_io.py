"""Writing files so that a reader sees the old file or the new one, never
half of one; and the one expander of `--input_file` globs.

One module, over 500 lines: every path the project writes, reads or lists
goes through it, local or remote, so the rules above hold in one place.

Every writer in `modeling/` writes under a temporary name from `temp_name`
(hidden, in the same folder as the output, so the rename is on one file
system and a leftover is easy to recognize) and renames it into place with
`publish`; on any error the temporary file or folder is removed.

A SIGKILL (or a power cut) leaves no chance to remove anything, so the next
writer into the same folder sweeps: a temporary name carries its writer's
process id and a tag of its host, and a leftover whose process is gone from
this host is deleted (`sweep_stale_temps`). Private scratch folders under the
system's temporary folder (`scratch_dir`) are named and swept the same way.

Local paths need only the standard library. Remote paths (anything with a
"://", e.g. gs://...) go through tf.io.gfile, imported only when one comes
up: data generation never loads TensorFlow.
"""

import contextlib
import errno
import glob
import os
import re
import socket
import tempfile
import uuid
import zlib

from absl import logging

from modeling import errors

# Four hex digits of the host name: a leftover is only ever judged by the
# host that wrote it (on a shared file system another host's live writer
# has a process id that means nothing here).
_HOST = f"{zlib.crc32(socket.gethostname().encode()) & 0xFFFF:04x}"
# `.<name>.tmp-<pid>-<host><6 hex>`, then whatever suffix a writer adds to
# the temporary name (a checkpoint's `.index`, `.data-00000-of-00001`).
# A temporary name's writer: its process id and host tag (temp_name).
WRITER_TAG = r"(\d+)-([0-9a-f]{4})[0-9a-f]{6}"
_TEMP_RE = re.compile(r"^\..+\.tmp-" + WRITER_TAG)
_swept = set()


def is_remote(path):
    """Whether `path` is a tf.io.gfile URL (gs://..., ram://...)."""
    return "://" in str(path)


def _gfile():
    import tensorflow as tf  # Only remote paths need TensorFlow.

    return tf.io.gfile


def _remote(call, path):
    """`call()` on a remote path; one that cannot be reached (no network,
    no such bucket, no credentials) is one line naming it, not a traceback
    of tf.errors (a missing or forbidden path keeps its own error)."""
    import tensorflow as tf

    try:
        return call()
    except (tf.errors.NotFoundError, tf.errors.PermissionDeniedError):
        raise
    except tf.errors.OpError as e:
        reason = (e.message or type(e).__name__).strip().splitlines()[0]
        raise errors.UserError(f"{path}: cannot reach it ({reason})") from e


def strip_dot(path):
    """`path` without trailing "/" and "/." parts ("x/." is x, not a name
    "." inside it). Not normpath: "link/.." is the link's parent, which
    only the file system knows."""
    path = path.rstrip("/")
    while path.endswith("/."):
        path = path[:-2].rstrip("/")
    return path or "/"


def temp_name(final):
    """The temporary name `final` is written under before `publish`:
    `<folder>/.<name>.tmp-<pid>-<host tag><6 hex>`, unique per writer
    (several workers of a multi-worker run may write the same file at once).
    The first call for a local folder sweeps it (`sweep_stale_temps`)."""
    final = strip_dot(os.fspath(final))
    folder, name = final.rsplit("/", 1) if "/" in final else ("", final)
    if not is_remote(final):
        sweep_stale_temps(folder or ".")
    tag = f".{name}.tmp-{os.getpid()}-{_HOST}{uuid.uuid4().hex[:6]}"
    return f"{folder}/{tag}" if folder else tag


def _process_gone(pid):
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # Alive, someone else's.
        return False
    return False


def sweep(folder, pattern):
    """Removes the entries of the local `folder` whose names match
    `pattern` (its groups: a process id and a host tag, WRITER_TAG) and
    whose process is gone from this host."""
    try:
        names = os.listdir(folder)
    except OSError:  # Not there yet: the writer's own error says so.
        return
    for name in names:
        match = pattern.match(name)
        if match is None or match.group(2) != _HOST:
            continue
        if _process_gone(int(match.group(1))):
            path = os.path.join(folder, name)
            logging.info("Removing %s, left by a killed run", path)
            try:
                remove_if_exists(path)
            except OSError as e:  # Raced with another sweeper, or read-only.
                logging.warning("Could not remove %s: %s", path, e)


def sweep_stale_temps(folder):
    """Deletes the temporary files and folders in the local `folder` that a
    writer on this host left when it was killed (its process is gone).
    Once per folder per process: leftovers come from runs before this one."""
    key = os.path.abspath(folder)
    if key in _swept:
        return
    _swept.add(key)
    sweep(folder, _TEMP_RE)


def scratch_dir(prefix, folder=None):
    """A `tempfile.TemporaryDirectory` for work files that are never
    published, named `<prefix><pid>-<host tag>_...` in `folder` (None: the
    system's temporary folder); scratch folders of the same prefix whose
    process is gone are deleted first."""
    folder = folder or tempfile.gettempdir()
    pattern = re.compile(re.escape(prefix) + r"(\d+)-([0-9a-f]{4})_")
    sweep(folder, pattern)
    return tempfile.TemporaryDirectory(
        prefix=f"{prefix}{os.getpid()}-{_HOST}_", dir=folder
    )


def publish(temp, final):
    """Renames `temp` over `final` (atomic for local paths)."""
    temp, final = os.fspath(temp), os.fspath(final)
    if is_remote(temp) or is_remote(final):
        _remote(lambda: _gfile().rename(temp, final, overwrite=True), final)
    else:
        os.replace(temp, final)


def remove_if_exists(path):
    """Removes a file or a folder (with its contents), if present."""
    path = os.fspath(path)
    if is_remote(path):
        gfile = _gfile()
        if is_dir(path):
            _remote(lambda: gfile.rmtree(path), path)
        elif exists(path):
            _remote(lambda: gfile.remove(path), path)
    elif os.path.isdir(path) and not os.path.islink(path):
        import shutil

        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.remove(path)


@contextlib.contextmanager
def atomic_path(final):
    """Yields a temporary path for a writer that takes a path (a TFRecord
    writer, safetensors, a SavedModel folder); publishes it as `final` when
    the block succeeds, removes it when the block raises."""
    with atomic_paths([final]) as (temp,):
        yield temp


def link_target(path):
    """Where writing `path` writes: a local symbolic link's target (the
    link stays as it is), else `path`."""
    path = os.fspath(path)
    if is_remote(path) or not os.path.islink(path):
        return path
    return os.path.realpath(path)


@contextlib.contextmanager
def atomic_paths(finals, stale=(), follow_links=True):
    """Yields temporary paths for several outputs published as one (the
    one publisher of atomic_path and atomic_writes): when the block
    succeeds, renames them all into place with SIGTERM held, then removes
    the `stale` files (an earlier run's outputs this one does not write,
    which must not sit beside them); when it raises, removes the
    temporaries and nothing else. So a run's outputs are never some this
    run's and some an earlier run's (vectors and their ids).

    follow_links: a final that is a symbolic link is written through it
    (its target gets the output, the link stays), as the original's
    GFile and TFRecord writers wrote its results. False (the checkpoint
    writers): a link is replaced by the file, as the original's Saver
    replaced one, so a run's checkpoints and their state file never write
    into a folder the user linked an earlier run's from."""
    from absl import logging

    from modeling import errors

    if follow_links:
        finals = [link_target(final) for final in finals]
    temps = [temp_name(final) for final in finals]
    _OPEN_TEMPORARIES.update(temps)
    try:
        yield temps
        # On the disk before they replace anything: a power cut after the
        # renames must not leave an empty file where the old one was.
        for temp in temps:
            sync(temp)
        with errors.sigterm_deferred():
            for temp, final in zip(temps, finals, strict=True):
                publish(temp, final)
            for folder in dict.fromkeys(os.path.dirname(f) for f in finals):
                sync_folder(folder)
            for path in stale:
                if exists(path):
                    logging.info("Removing %s: an earlier run's", path)
                    remove_if_exists(path)
    except BaseException:
        for temp in temps:
            remove_if_exists(temp)
        raise
    finally:
        _OPEN_TEMPORARIES.difference_update(temps)


# The temporary files of the atomic writes under way in this process: what
# an exit that skips the writers' own clean-up (os._exit in
# modeling/signals.py exit_now) removes first.
_OPEN_TEMPORARIES = set()


def remove_open_temporaries():
    """Removes the (local) temporary files of unfinished atomic writes."""
    for temp in list(_OPEN_TEMPORARIES):
        if not is_remote(temp):
            try:  # A file, or a folder (atomic_path: a SavedModel).
                remove_if_exists(temp)
            except OSError:
                pass


def open_for_writing(temp, mode="w", encoding="utf-8"):
    """A (temporary) file open for writing, local or remote: text with
    "\n" line ends, or bytes ("wb")."""
    if is_remote(temp):
        return _gfile().GFile(temp, mode)
    if mode == "w":
        return open(temp, "w", encoding=encoding, newline="\n")  # noqa: SIM115
    return open(temp, "wb")  # noqa: SIM115


@contextlib.contextmanager
def atomic_write(final, mode="w", encoding="utf-8", follow_links=True):
    """Yields a file open for writing under a temporary name; closes it once
    and publishes it as `final` when the block succeeds. On any error, in
    the block or from close() (a full disk), the temporary file is removed
    and the error raised.

    Args:
      final: str or path-like, the output file.
      mode: "w" (text, "\\n" line ends) or "wb".
      encoding: of text mode, for local files (tf.io.gfile writes UTF-8).
      follow_links: see `atomic_paths`.
    """
    with atomic_writes([final], mode, encoding, follow_links=follow_links) as (
        f,
    ):
        yield f


@contextlib.contextmanager
def atomic_writes(
    finals, mode="w", encoding="utf-8", stale=(), follow_links=True
):
    """`atomic_write` for several files published as one: yields a list of
    files open under temporary names; when the block succeeds, closes them
    all (a full disk fails here, before any is published), then renames
    them all into place with SIGTERM held. So a run's outputs are never
    some this run's and some an earlier run's."""
    if mode not in ("w", "wb"):
        raise ValueError(f"mode must be 'w' or 'wb', not {mode!r}")
    with atomic_paths(finals, stale, follow_links) as temps:
        files = []
        try:
            files.extend(
                open_for_writing(temp, mode, encoding) for temp in temps
            )
            yield files
        except BaseException:
            for f in files:
                with contextlib.suppress(Exception):
                    f.close()
            raise
        close_all(files)


def read_bytes(path, offset=0, size=None):
    """Bytes of a local or remote file: `size` of them from `offset` (all
    the rest when None); fewer when the file ends first, so a caller that
    needs exactly `size` compares the length (a checkpoint's tensor read
    at its offset in the data file, modeling/tensor_bundle.py).

    Raises:
      FileNotFoundError: naming the file.
    """
    path = os.fspath(path)
    if is_remote(path):
        if not exists(path):
            raise FileNotFoundError(f"File not found: {path}")
        opened = _gfile().GFile(path, "rb")
    else:
        opened = open(path, "rb")  # noqa: SIM115 (closed below)
    with opened as f:
        if size is not None:
            # No more than the file holds: a size from a corrupt or hostile
            # header (a checkpoint index claiming terabytes) would otherwise
            # be allocated before the read finds the file's end.
            length = (
                f.size() if is_remote(path) else os.fstat(f.fileno()).st_size
            )
            size = max(0, min(size, length - offset))
        if offset:
            f.seek(offset)
        return f.read(-1 if size is None else size)


def _existing(path):
    """`path` as a str, or FileNotFoundError naming it."""
    path = os.fspath(path)
    if not exists(path):
        raise FileNotFoundError(f"Data file not found: {path}")
    return path


def read_text(path):
    """The UTF-8 text of a local or remote file.

    Raises:
      FileNotFoundError: naming the file.
      ValueError: `<path> line N: not UTF-8 text`.
    """
    path = _existing(path)
    data = read_bytes(path)
    try:
        # A byte-order mark (Windows editors write one) is not text.
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise ValueError(f"{path} line {line}: not UTF-8 text") from None


def read_lines(path):
    """The lines of a UTF-8 text file, split at "\\n" only (a "\\r" before
    it dropped): U+2028, U+0085 or a form feed inside a line are text, not
    line ends as str.splitlines() would take them. No final empty line (nor
    a byte-order mark: `read_text`).

    Raises:
      as `read_text`.
    """
    return list(text_lines(path, keep_ends=False))


def _split_at_newlines(f, block=1 << 20):
    """The b"\\n"-ended lines of a binary file object read in blocks (the
    last one without its end when the file has none)."""
    rest = b""
    while data := f.read(block):
        parts = (rest + data).split(b"\n")
        rest = parts.pop()
        for part in parts:
            yield part + b"\n"
    if rest:
        yield rest


def text_lines(path, keep_ends=True):
    """The lines of a UTF-8 text file (local or remote) read one at a time:
    memory for one line, whatever the file's size. Split at "\\n" only;
    `keep_ends`: with their line ends (as the csv module wants them), else
    without them and a "\\r" before them. A byte-order mark is not text.

    Raises:
      FileNotFoundError: naming the file.
      ValueError: `<path> line N: not UTF-8 text`.
    """
    path = _existing(path)
    opened = _gfile().GFile(path, "rb") if is_remote(path) else open(path, "rb")
    with opened as f:
        # A local binary file's lines end at b"\n" only; GFile's readline
        # drops every "\r" too, so a remote file is split here.
        raws = f if not is_remote(path) else _split_at_newlines(f)
        for number, raw in enumerate(raws, start=1):
            if number == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise ValueError(
                    f"{path} line {number}: not UTF-8 text"
                ) from None
            if not keep_ends:
                line = line.removesuffix("\n").removesuffix("\r")
            yield line


def chunks(items, size):
    """Lists of up to `size` consecutive items of any iterable (a file's
    rows read lazily, or a list): what a long input is processed in, so
    that only one chunk's features and outputs are in memory."""
    chunk = []
    for item in items:
        chunk.append(item)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def sync(path):
    """Flushes a local file, or every file and folder under a local folder
    (a SavedModel), to the disk (os.fsync): what must survive a power cut
    before it replaces an older copy (`atomic_paths`, an export's
    `folders.publishing`). Nothing for a remote path: an object store has
    the data when the writer closes.

    Raises:
      OSError: the disk could not take a file's data (EIO, ENOSPC).
    """
    path = os.fspath(path)
    if is_remote(path):
        return
    if os.path.isdir(path) and not os.path.islink(path):
        for folder, _, names in os.walk(path):
            for name in names:
                _fsync(os.path.join(folder, name))
            sync_folder(folder)
    else:
        _fsync(path)


def _fsync(path):
    """os.fsync of a local file by its path (Linux flushes the file's data
    whatever descriptor wrote it)."""
    if os.path.islink(path):  # A link's target is not this write's.
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    except OSError as e:
        # A file system without fsync (EINVAL) keeps nothing to flush.
        if e.errno not in (errno.EINVAL, errno.ENOTSUP):
            raise
    finally:
        os.close(fd)


def sync_folder(folder):
    """Makes the renames into a local folder durable (fsync of the folder);
    nothing for a remote one or where folders cannot be opened."""
    if is_remote(folder):
        return
    try:
        fd = os.open(folder or ".", os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_text(path, text, follow_links=True):
    """Writes the str `text` to `path` atomically (see `atomic_write`)."""
    with atomic_write(path, follow_links=follow_links) as f:
        f.write(text)


def close_all(files):
    """Closes every file (or writer) once, even after one fails; raises
    the first error."""
    error = None
    for f in files:
        try:
            f.close()
        except BaseException as e:  # noqa: BLE001 (raised below)
            error = error or e
    if error is not None:
        raise error


def write_texts(texts, stale=()):
    """Writes the files {path: str} as one, then removes `stale` ones
    (`atomic_writes`)."""
    with atomic_writes(list(texts), stale=stale) as files:
        for f, text in zip(files, texts.values(), strict=True):
            f.write(text)


def make_dirs(path):
    """Creates a folder and its parents; nothing when it exists."""
    path = os.fspath(path)
    if is_remote(path):
        _remote(lambda: _gfile().makedirs(path), path)
    else:
        os.makedirs(path, exist_ok=True)


# Folders `make_run_dir` created in this process, parents first.
_RUN_DIRS = []


def make_run_dir(path):
    """`make_dirs` for a run's output folder, remembering the local folders
    it created: a run that fails before writing anything into them leaves
    no empty folder behind (`remove_empty_run_dirs`, called by the
    scripts' error handling)."""
    path = os.fspath(path)
    if is_remote(path):
        make_dirs(path)
        return
    missing = []
    folder = os.path.abspath(path)
    while not os.path.exists(folder):
        missing.append(folder)
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    os.makedirs(path, exist_ok=True)
    _RUN_DIRS.extend(reversed(missing))


def remove_empty_run_dirs():
    """Removes the folders `make_run_dir` created that are still empty,
    deepest first (a folder with anything in it stays, and so do its
    parents)."""
    while _RUN_DIRS:
        try:
            os.rmdir(_RUN_DIRS.pop())
        except OSError:  # Not empty (or gone): keep the rest.
            _RUN_DIRS.clear()


# Training folders this process holds locked: realpath -> open descriptor.
# None: runs are not locked (outside `locked_runs`).
_RUN_LOCKS = None


@contextlib.contextmanager
def locked_runs():
    """The block's training runs lock their output folders
    (`lock_run_dir`); every lock is released at its end. The scripts run
    in one (flags.run_script): a script's process is one run. A program
    calling the tasks itself (a notebook, the tests) runs them unlocked,
    one after the other in one process."""
    global _RUN_LOCKS
    outer, _RUN_LOCKS = _RUN_LOCKS, {}
    try:
        yield
    finally:
        for fd in _RUN_LOCKS.values():
            os.close(fd)
        _RUN_LOCKS = outer


def lock_run_dir(path, flag="--output_dir"):
    """Locks a local training folder for this process until the end of
    `locked_runs` (nothing outside one, or for a remote folder): a second
    training run in the same folder at the same time would mix its
    checkpoints with this one's (each resumes from the other's, both
    rotate them) and fails at once instead. An advisory lock (flock) on the
    folder itself: no file is added, and the kernel releases it however
    the process ends. Where the folder's file system has no such locks
    (some network mounts), nothing is locked.

    Raises:
      errors.UserError: another process holds the folder, naming it.
    """
    path = os.fspath(path)
    if _RUN_LOCKS is None or is_remote(path):
        return
    try:
        import fcntl
    except ImportError:  # Not a POSIX system.
        return
    key = os.path.realpath(path)
    if key in _RUN_LOCKS:
        return
    fd = os.open(key, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        holder = _flock_holder(key)
        raise errors.UserError(
            f"{flag}={path} is in use by another training run"
            f"{f' (process {holder})' if holder else ''}: two runs in one "
            "folder would mix their checkpoints. Wait for it to end, or "
            f"give another {flag}."
        ) from None
    except OSError as e:  # No flock here (e.g. a network mount).
        os.close(fd)
        logging.debug("Not locking %s: %s", path, e)
        return
    _RUN_LOCKS[key] = fd


def _flock_holder(path):
    """The process id holding a flock on `path`, from Linux's /proc/locks
    (None where unknown)."""
    try:
        st = os.stat(path)
        with open("/proc/locks") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    device = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}"
    for line in lines:
        fields = line.split()
        # "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF"
        if "FLOCK" in fields and len(fields) >= 6:
            pid, where = fields[4], fields[5]
            if where == f"{device}:{st.st_ino}":
                return pid
    return None


def exists(path):
    path = os.fspath(path)
    if is_remote(path):
        return _remote(lambda: _gfile().exists(path), path)
    return os.path.exists(path)


def is_dir(path):
    """Whether `path` is a folder (local, a link to one included, or
    remote)."""
    path = os.fspath(path)
    if is_remote(path):
        return _remote(lambda: _gfile().isdir(path), path)
    return os.path.isdir(path)


def list_dir(path):
    """The sorted names in the folder `path` (a remote subfolder's without
    tf.io.gfile's trailing "/")."""
    path = os.fspath(path)
    if is_remote(path):
        names = _remote(lambda: _gfile().listdir(path), path)
        return sorted(name.rstrip("/") for name in names)
    return sorted(os.listdir(path))


def check_folder_path(path, name):
    """Refuses an output folder that exists as something else (a file, or
    a link to one): before a run starts, rather than a traceback from its
    first write.

    Args:
      name: how the message names it, e.g. "--output_dir=<path>".

    Raises:
      NotADirectoryError: "<name> is a file, not a folder", or a local
        folder to be made below a file.
    """
    if exists(path):
        if not is_dir(path):
            raise NotADirectoryError(f"{name} is a file, not a folder")
        return
    if is_remote(path):
        return
    # Not there yet: the folder it would be made in must be a folder.
    parent = os.path.dirname(os.path.abspath(path))
    while not os.path.lexists(parent) and parent != os.path.dirname(parent):
        parent = os.path.dirname(parent)
    if os.path.exists(parent) and not os.path.isdir(parent):
        raise NotADirectoryError(
            f"{name}: {parent} is a file, so no folder can be made there"
        )


def check_file_path(path, name):
    """Refuses an output file path that is a folder, or whose folder does
    not exist: before a run starts, rather than at the rename that
    publishes its result.

    Args:
      name: how the message names it, e.g. "--output_file=<path>".

    Raises:
      IsADirectoryError, FileNotFoundError: naming `name`.
    """
    path = os.fspath(path)
    if is_dir(path):
        raise IsADirectoryError(f"{name} is a folder, not a file")
    target = link_target(path)  # Written through (atomic_paths).
    folder = os.path.dirname(target) or "."
    if not is_dir(folder):
        via = f" (a link to {target})" if target != path else ""
        raise FileNotFoundError(
            f"The folder of {name}{via} does not exist: create {folder} first"
        )


def resolved(path):
    """The file `path` names: a local path made absolute with its links
    followed, a remote one as written."""
    path = os.fspath(path)
    return path if is_remote(path) else os.path.realpath(path)


def _canonical(path):
    path = os.fspath(path)
    if is_remote(path):
        return path.rstrip("/") + "/"
    return os.path.join(resolved(path), "")


def within(path, folder):
    """Whether `path` is `folder` or lies inside it: local paths compared
    once resolved (links followed, relative to the working directory),
    remote ones as written."""
    return _canonical(path).startswith(_canonical(folder))


def overlap(a, b):
    """Whether the paths `a` and `b` name the same folder or one lies
    inside the other (`within`)."""
    return within(a, b) or within(b, a)


def size(path):
    """A file's size in bytes (local or remote)."""
    path = os.fspath(path)
    if is_remote(path):
        return _remote(lambda: _gfile().stat(path).length, path)
    return os.path.getsize(path)


def files_named(prefix, tail):
    """The sorted paths `prefix` + a tail that the regex `tail` matches in
    full, from a listing of the prefix's folder: unlike a glob, a prefix
    holding glob characters (`run[1]/model.ckpt`) means itself."""
    prefix = os.fspath(prefix)
    folder, base = os.path.split(prefix)
    if not is_dir(folder or "."):
        return []
    shape = re.compile(re.escape(base) + tail)
    return [
        os.path.join(folder, name) if folder else name
        for name in list_dir(folder or ".")
        if shape.fullmatch(name)
    ]


def glob_files(pattern):
    """The sorted paths matching one glob pattern (local or remote).

    Unlike tf.io.gfile.glob (the original's), a local `*` does not match
    names starting with a dot (this project's hidden work folders and
    temporary files among them), and the order is sorted (the original's
    was the folder's)."""
    pattern = os.fspath(pattern)
    if is_remote(pattern):
        return sorted(_remote(lambda: _gfile().glob(pattern), pattern))
    return sorted(glob.glob(pattern))


def expand_input_files(input_file):
    """A comma-separated list of globs -> the list of files, each sorted.

    Local patterns use Python's glob; remote ones (gs://...) tf.io.gfile's.
    Empty entries are skipped; a file matched twice is listed twice.

    Raises:
      FileNotFoundError: naming the pattern that matched nothing.
      IsADirectoryError: a local pattern matched a directory.
    """
    files = []
    for pattern in input_file.split(","):
        pattern = pattern.strip()
        if not pattern:
            continue
        matched = glob_files(pattern)
        if not matched:
            raise FileNotFoundError(
                f"No file matches input pattern {pattern!r}"
            )
        for path in matched:
            # A remote folder is named when it is read (one stat per
            # match would add up over a bucket of shards).
            if not is_remote(path) and os.path.isdir(path):
                raise IsADirectoryError(
                    f"Input {path} (from pattern {pattern!r}) is a directory"
                )
        files.extend(matched)
    if not files:
        raise FileNotFoundError(f"No input files given in {input_file!r}")
    return files
