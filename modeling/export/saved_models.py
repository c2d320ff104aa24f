"""The one writer of this repository's SavedModels: the serving exports
(base.save_export) and the Hub-style encoder and preprocessing models
(encoder.export). Publishing is the caller's: it writes into
folders.publishing's temporary folder, which is renamed when complete."""

import os

import tensorflow as tf

from modeling.export import folders


def write(root, folder, signatures, files=None, extras=None):
    """Saves `root` as a SavedModel in `folder`, with its files.

    Args:
      root: the tf.Module (or tf.train.Checkpoint) to save.
      folder: str, the SavedModel's folder.
      signatures: {name: concrete function}.
      files: {name: bytes} written beside saved_model.pb (a vocabulary, a
        TF Lite model), or None.
      extras: {name: str} written into assets.extra (bert_export.json, the
        Hub encoder's bert_config.json), or None.
    """
    tf.saved_model.save(root, folder, signatures=signatures)
    for name, content in (files or {}).items():
        with tf.io.gfile.GFile(os.path.join(folder, name), "wb") as f:
            f.write(content)
    for name, text in (extras or {}).items():
        folders.write_extra(folder, name, text)
