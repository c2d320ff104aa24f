"""run_embeddings' Settings: its flags (modeling/tasks/embeddings.py runs
them)."""

import dataclasses
import typing

from modeling import options
from modeling.options import option
from modeling.tasks import common as common_lib
from modeling.tasks.settings import common
from modeling.training import run_config


@dataclasses.dataclass(kw_only=True)
class RunConfig(run_config.RunConfig):
    """The training flags, with sentence-transformers' learning rate."""

    learning_rate: float = option(
        2e-05, "The initial learning rate (sentence-transformers')."
    )


@dataclasses.dataclass(kw_only=True)
class Settings(common.FineTuningSettings, common.LongInputSettings):
    """run_embeddings' flags (the fine-tuning scripts' shared ones too)."""

    # An original checkpoint's; a sentence-transformers or HF folder has
    # its own. do_lower_case None: the folder's casing.
    bert_config_file: str | None = options.bert_config_file()
    vocab_file: str | None = options.vocab_file(None)
    do_lower_case: bool | None = options.do_lower_case(None)
    # Not a flag here: nothing to keep the best of.
    eval_during_training: bool = False
    train_file: str | None = option(
        None,
        "--do_train's pairs (CSV / TSV / JSON Lines): anchor, positive and "
        "optionally negative columns (in-batch negatives, scale 20), or "
        "sentence1, sentence2, score (CoSENT, scale 20).",
    )
    num_train_epochs: float = option(1.0, "Passes over --train_file.")
    pooling: str | None = option(
        None,
        "How token vectors become a text's vector: mean (of the real tokens), "
        "cls (the [CLS] token's), max (per dimension). Default: the "
        "sentence-transformers folder's, else mean.",
        choices=("mean", "cls", "max"),
    )
    normalize: bool | None = option(
        None,
        "Scale vectors to unit length. Default: the sentence-transformers "
        "folder's (a Normalize module); an HF folder's: False (as "
        "sentence-transformers reads it); an original checkpoint's: True.",
    )
    max_seq_length: int | None = option(
        None,
        "Word pieces per text ([CLS] and [SEP] included); longer texts are "
        "cut (and counted in the log). Default: the folder's "
        "sentence_bert_config.json, an HF folder's tokenizer "
        "model_max_length, else 128 (within max_position_embeddings).",
    )
    do_predict: bool = option(False, "Embed --predict_file.")
    predict_file: str | None = option(
        None,
        "Texts to embed: .txt (one per line) or CSV / TSV / JSON Lines "
        "(--text_column).",
    )
    text_column: str | None = option(
        None,
        "The text column of CSV / TSV / JSON Lines files (default: the first "
        "of text, sentence, text_a, sentence1, query).",
    )
    id_column: str | None = option(
        None, "The id column (default: the row's line number)."
    )
    eval_file: str | None = option(
        None,
        "--do_eval's file: sentence1, sentence2, score columns (STS-B's "
        "dev.tsv works as it is) or query, positive columns.",
    )
    do_search: bool = option(
        False, "Search --corpus_file for each of --query_file."
    )
    corpus_file: str | None = option(
        None, "The texts to search (as --predict_file)."
    )
    query_file: str | None = option(None, "The queries (as --predict_file).")
    corpus_embeddings: str | None = option(
        None,
        "Instead of --corpus_file: an embeddings.npy (its ids.txt beside "
        "it) or corpus_embeddings.npy (its corpus_ids.txt) of this model, "
        "memory-mapped.",
    )
    top_k: int = option(10, "Results per query.")
    predict_batch_size: int = option(32, "Texts per batch.")
    export_dir: str | None = option(
        None,
        "Write a serving SavedModel here: raw strings in, vectors out "
        "(tokenized in the graph; model.tflite too with a TF Lite "
        "--predict_runtime).",
    )
    # The flag is run_config's (--predict_runtime); embedding runs read it
    # here too.
    predict_runtime: str | None = None
    run_config: typing.Any = options.nested(RunConfig)

    def __post_init__(self):
        s = self
        if not s.init_checkpoint:
            raise ValueError(
                "--init_checkpoint is required: a sentence-transformers or "
                "HF BERT folder, or an original checkpoint"
            )
        modes = ("do_train", "do_predict", "do_eval", "do_search")
        common_lib.check_modes(s, modes)
        if any(getattr(s, m) for m in modes) and not s.output_dir:
            raise ValueError("--output_dir is required")
        common_lib.check_output_folders(s)
        for flag, needed in (
            ("train_file", s.do_train),
            ("predict_file", s.do_predict),
            ("eval_file", s.do_eval),
            ("query_file", s.do_search),
        ):
            if needed and not getattr(s, flag):
                raise ValueError(f"--{flag} is required")
        if s.do_search and not (s.corpus_file or s.corpus_embeddings):
            raise ValueError(
                "--do_search needs --corpus_file (or --corpus_embeddings, "
                "an embeddings.npy of it)"
            )
        if s.top_k < 1:
            raise ValueError(f"--top_k must be at least 1, got {s.top_k}")
        common_lib.check_counts(s)
        if s.run_config is None:
            s.run_config = run_config.RunConfig(
                s.output_dir or "", 0, predict_runtime=s.predict_runtime
            )
        common_lib.check_predict_runtime(s)
        if s.do_train and s.run_config.gradient_accumulation_steps > 1:
            # In-batch negatives and CoSENT's pairs are the batch's own: a
            # micro-batch would see a part of them (a smaller, other loss).
            raise ValueError(
                "--gradient_accumulation_steps="
                f"{s.run_config.gradient_accumulation_steps}: run_embeddings' "
                "losses compare each pair with the rest of its batch, which "
                "micro-batches would split; lower --train_batch_size instead"
            )
