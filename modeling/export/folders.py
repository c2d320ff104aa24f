"""What an export folder of this repository holds, and the one rule for
putting a new export where a folder already is.

Every export is written under a temporary name beside its folder and
renamed onto it when complete (`publishing`): base.save_export
(run_classifier, run_squad, run_ner, run_multiple_choice and
run_embeddings' --export_dir, the Keras models' export_for_serving) and
encoder.export (export_hub.py's --export_path). A folder can only be renamed
onto an absent one, so an existing folder is renamed aside first, and
removed once the new one is in place. It is replaced only when it is empty
or holds an export of this repository and nothing an export does not write
(`check_replaceable`); anything else there (a user's
folder, a file put beside an earlier export, a run's --output_dir) is an
error naming the folder, and nothing is changed. The scripts check this
with their settings (tasks/common.py check_output_folders), before any
training, and `publishing` checks again just before the old export goes
(the folder may have changed during the run).

An export folder that is a symbolic link stays one: the export is
published as the folder it points to (`target`).

Imports neither TensorFlow nor Keras: the scripts' flag checks use it.
"""

import contextlib
import json
import os
import re

from absl import logging

from modeling import errors
from modeling.data import file_io

# Beside the SavedModel's own files: what this repository adds to it.
EXTRA_ASSETS = "assets.extra"
# A serving export's record (base.save_export): labels, task kind,
# tokenization, and the files it wrote besides the SavedModel ("vocab_file",
# "tflite": {"file": ...}).
EXPORT_INFO_FILE = "bert_export.json"
# A TF Hub-style encoder's BertConfig (modeling/saved_encoder.py CONFIG_FILE).
HUB_CONFIG_FILE = "bert_config.json"
# In each SavedModel encoder.export writes: {"export_type": "encoder" or
# "preprocessing"} (a preprocessing model has no other mark).
HUB_EXPORT_FILE = "bert_hub_export.json"
# export_hub.py --export_type=both: one SavedModel in each subfolder.
HUB_PARTS = ("encoder", "preprocessing")
# What tf.saved_model.save writes at the top of its folder (assets/ holds
# the files the model tracks: its vocabulary).
_SAVED_MODEL_FILES = ("saved_model.pb", "fingerprint.pb")
_VARIABLES = "variables"
_ASSETS = "assets"
_VARIABLE_FILE = re.compile(r"variables\.(index|data-\d{5}-of-\d{5})")
# How many of the entries no export writes a message names.
_NAMED = 3


def write_extra(folder, name, text):
    """Writes `text` to <folder>/assets.extra/<name> (atomically)."""
    extra = os.path.join(folder, EXTRA_ASSETS)
    file_io.make_dirs(extra)
    file_io.write_text(os.path.join(extra, name), text)


def target(export_dir):
    """The folder an export to `export_dir` is published as: where a
    symbolic link points (the link stays as it is), else export_dir."""
    return file_io.link_target(file_io.strip_dot(os.fspath(export_dir)))


def _own_names(path):
    """(names at the top, names in assets.extra) that the export in the
    SavedModel folder `path` wrote besides the SavedModel's files, or None
    when no record in its assets.extra marks it as an export of this
    repository."""
    extra = os.path.join(path, EXTRA_ASSETS)
    info_path = os.path.join(extra, EXPORT_INFO_FILE)
    if file_io.exists(info_path):
        try:
            info = json.loads(file_io.read_text(info_path))
        except ValueError:  # Damaged: not recognizably ours.
            return None
        if not isinstance(info, dict):
            return None
        tflite = info.get("tflite")
        files = {
            info.get("vocab_file"),
            tflite.get("file") if isinstance(tflite, dict) else None,
        }
        return {f for f in files if isinstance(f, str)}, {EXPORT_INFO_FILE}
    hub_marks = (HUB_EXPORT_FILE, HUB_CONFIG_FILE)
    if any(file_io.exists(os.path.join(extra, n)) for n in hub_marks):
        return set(), set(hub_marks)
    return None


def _saved_model_assets(path):
    """The file names the SavedModel in `path` tracks in assets/ (its
    vocabulary): the asset file definitions of saved_model.pb (SavedModel
    field 2, its MetaGraphDefs; their field 6, AssetFileDefs; their field
    2, the file name). Empty when it cannot be read: then every file in
    assets/ is someone else's."""
    from modeling import tensor_bundle  # No TensorFlow: the wire format.

    names = set()
    try:
        data = file_io.read_bytes(os.path.join(path, "saved_model.pb"))
        for meta in tensor_bundle.parse_message(data).get(2, []):
            for asset in tensor_bundle.parse_message(meta).get(6, []):
                for name in tensor_bundle.parse_message(asset).get(2, []):
                    names.add(name.decode("utf-8"))
    except (OSError, ValueError, IndexError):
        return set()
    return names


def _foreign_in(path, name, allowed):
    """The entries of the subfolder `name` of `path` not matched by
    `allowed` (a name -> bool), as "name/entry"; ["name"] if it is a
    file."""
    folder = os.path.join(path, name)
    if not file_io.is_dir(folder):
        return [name]
    return [f"{name}/{n}" for n in file_io.list_dir(folder) if not allowed(n)]


def foreign_entries(path):
    """The entries of the existing folder `path` (paths relative to it)
    that no export of this repository writes: [] for an empty folder or an
    export with nothing else in it; every entry of a folder that holds no
    export.

    A serving or hub SavedModel (its record in assets.extra) may hold the
    SavedModel's files, its variables, assets, the records in assets.extra
    and the files its record names; export_hub's "both" folder holds
    encoder/ and preprocessing/, each such a SavedModel (or empty).
    """
    names = file_io.list_dir(path)
    if names and all(
        n in HUB_PARTS and file_io.is_dir(os.path.join(path, n)) for n in names
    ):
        return [
            f"{n}/{entry}"
            for n in names
            for entry in foreign_entries(os.path.join(path, n))
        ]
    own = None if not names else _own_names(path)
    if own is None:
        return names
    top, extra = own
    out = []
    for name in names:
        if name == _VARIABLES:
            out += _foreign_in(path, name, _VARIABLE_FILE.fullmatch)
        elif name == EXTRA_ASSETS:
            out += _foreign_in(path, name, extra.__contains__)
        elif name == _ASSETS:
            out += _foreign_in(
                path, name, _saved_model_assets(path).__contains__
            )
        elif name in _SAVED_MODEL_FILES or name in top:
            if file_io.is_dir(os.path.join(path, name)):
                out.append(name)
        else:
            out.append(name)
    return out


def check_replaceable(export_dir, flag=None):
    """Refuses an export folder that a new export may not replace: one that
    exists and is not empty or an export of this repository alone.

    Args:
      export_dir: the folder (a link: the folder it points to is checked).
      flag: the flag that named it ("export_dir"), for the message.

    Raises:
      NotADirectoryError: it is a file.
      errors.UserError: naming the folder and what in it no export writes.
    """
    path = target(export_dir)
    name = f"--{flag}={export_dir}" if flag else str(export_dir)
    if os.path.islink(file_io.strip_dot(os.fspath(export_dir))):
        name += f" (a link to {path})"
    if not file_io.is_remote(path) and file_io.within(os.getcwd(), path):
        raise errors.UserError(
            f"{name} is the current folder or holds it: an export replaces "
            "its whole folder, so it must be a folder of its own (name a new "
            "one, e.g. ./export)"
        )
    file_io.check_folder_path(path, name)
    if not file_io.exists(path):
        return
    if not file_io.is_remote(path) and os.path.ismount(path):
        # Published by renaming the old folder aside: a mount point (a
        # Docker volume) cannot be renamed. Said now, not after training.
        raise errors.UserError(
            f"{name} is a mount point, which an export cannot replace "
            "atomically: export into a new folder inside it, e.g. "
            f"{os.path.join(os.fspath(export_dir), 'export')}"
        )
    foreign = foreign_entries(path)
    if not foreign:
        return
    shown = ", ".join(foreign[:_NAMED])
    if len(foreign) > _NAMED:
        shown += f" and {len(foreign) - _NAMED} more"
    # Entries named at the top only, and no record: not an export at all.
    if _own_names(path) is None and not any("/" in f for f in foreign):
        what = f"is not an export of this repository (it holds {shown})"
    else:
        what = f"holds files that no export writes ({shown})"
    raise errors.UserError(
        f"{name} {what}: an export replaces only an earlier export or an "
        "empty folder, and nothing was changed (choose a new or empty "
        "folder, or move those files)"
    )


@contextlib.contextmanager
def publishing(export_dir):
    """Yields a temporary folder beside `export_dir` (its target, for a
    link) to write an export into; when the block succeeds, publishes it
    in place of the earlier export there. Refuses (check_replaceable)
    before anything is written and again just before the earlier export is
    replaced; on any error the temporary folder is removed and the folder
    left as it was.

    A folder is renamed only onto an absent one, so the earlier export is
    first renamed aside (`.<name>.replaced-<pid>-...`), the new one renamed
    into place, and only then the earlier one removed; a SIGTERM waits
    until all three are done (on local disks: a rename of a gs:// folder
    copies it). Killed (SIGKILL) between the renames, the earlier export is
    left under that hidden name; once a later export of the folder is in
    place, such leftovers of killed runs go (`_sweep_replaced`)."""
    check_replaceable(export_dir)
    final = target(export_dir)
    tmp = file_io.temp_name(final)
    aside = None
    try:
        yield tmp
        check_replaceable(export_dir)
        # On the disk before the earlier export goes (see file_io.sync).
        file_io.sync(tmp)
        with errors.sigterm_deferred():
            if file_io.exists(final):
                if file_io.list_dir(final):
                    logging.info("Replacing the earlier export in %s", final)
                folder, name = os.path.split(file_io.temp_name(final))
                # The writer's tag follows the last ".tmp-" (the folder's
                # own name may hold one).
                head, _, tag = name.rpartition(".tmp-")
                aside = os.path.join(folder, head + _REPLACED + tag)
                file_io.publish(final, aside)
            try:
                file_io.publish(tmp, final)
            except BaseException:
                if aside is not None:  # The earlier export back in place.
                    file_io.publish(aside, final)
                    aside = None
                raise
            file_io.sync_folder(os.path.dirname(final))
            if aside is not None:
                try:
                    file_io.remove_if_exists(aside)
                except Exception as e:  # noqa: BLE001 (the new export is in place; gfile's errors are not OSErrors)
                    logging.warning(
                        "Could not remove the earlier export, renamed to "
                        "%s: %s",
                        aside,
                        e,
                    )
    except BaseException:
        file_io.remove_if_exists(tmp)
        raise
    _sweep_replaced(final)


# What the earlier export's hidden name has in place of ".tmp-".
_REPLACED = ".replaced-"


def _sweep_replaced(final):
    """Removes earlier exports of `final` that a killed run renamed aside
    (its process gone from this host), now that an export is in place."""
    if file_io.is_remote(final):
        return
    folder, name = os.path.split(final)
    pattern = re.compile(
        r"^\." + re.escape(name) + re.escape(_REPLACED) + file_io.WRITER_TAG
    )
    file_io.sweep(folder or ".", pattern)
