"""Sentence embeddings and semantic search with a BERT model: the vectors of
sentence-transformers for the same folder.

    python run_embeddings.py --init_checkpoint=$ST_MODEL_DIR \
      --do_predict --predict_file=sentences.txt --output_dir=/tmp/emb

    python run_embeddings.py --init_checkpoint=$ST_MODEL_DIR \
      --do_search --corpus_file=corpus.jsonl --query_file=queries.txt \
      --top_k=10 --output_dir=/tmp/search

    python run_embeddings.py --init_checkpoint=$ST_MODEL_DIR \
      --do_eval --eval_file=$GLUE_DIR/STS-B/dev.tsv --output_dir=/tmp/sts

    python run_embeddings.py --init_checkpoint=$ST_MODEL_DIR \
      --do_train --train_file=$GLUE_DIR/STS-B/train.tsv \
      --do_eval --eval_file=$GLUE_DIR/STS-B/dev.tsv --output_dir=/tmp/sts_ft

--init_checkpoint is a sentence-transformers folder (its pooling,
normalization, sequence length and casing read from its own files), an HF
BERT folder, or an original checkpoint (--vocab_file, --bert_config_file).
--do_train fine-tunes on pairs: anchor / positive (/ negative) columns with
in-batch negatives, or sentence1 / sentence2 / score with the CoSENT loss
(checkpoints in the original layout in output_dir, resumable). --do_predict
writes embeddings.npy (float32 [N, H], input order) and
ids.txt; --do_search search_results.jsonl (each query's top_k corpus ids and
scores); --do_eval eval_results.txt (Spearman / Pearson of cosine
similarities for scored pairs, MRR@10 and recall for query / positive
pairs); --export_dir a serving SavedModel from strings to vectors. The logic
lives in modeling/tasks/embeddings.py.
"""

from absl import flags

from modeling import flags as shared_flags

FLAGS = flags.FLAGS

flags.DEFINE_enum(
    "pooling",
    None,
    ["mean", "cls", "max"],
    "How token vectors become a text's vector: mean (of the real tokens), "
    "cls (the [CLS] token's), max (per dimension). Default: the "
    "sentence-transformers folder's, else mean.",
)
flags.DEFINE_bool(
    "normalize",
    None,
    "Scale vectors to unit length. Default: the sentence-transformers "
    "folder's (a Normalize module), else True.",
)
flags.DEFINE_integer(
    "max_seq_length",
    None,
    "Word pieces per text ([CLS] and [SEP] included); longer texts are cut "
    "(and counted in the log). Default: the folder's "
    "sentence_bert_config.json, else 128.",
)
flags.DEFINE_bool("do_predict", False, "Embed --predict_file.")
flags.DEFINE_string(
    "train_file",
    None,
    "--do_train's pairs (CSV / TSV / JSON Lines): anchor, positive and "
    "optionally negative columns (in-batch negatives, scale 20), or "
    "sentence1, sentence2, score (CoSENT, scale 20).",
)
flags.DEFINE_float("num_train_epochs", 1.0, "Passes over --train_file.")
flags.DEFINE_float(
    "learning_rate", 2e-5, "The initial learning rate (sentence-transformers')."
)
flags.DEFINE_string(
    "predict_file",
    None,
    "Texts to embed: .txt (one per line) or CSV / TSV / JSON Lines "
    "(--text_column).",
)
flags.DEFINE_string(
    "text_column",
    None,
    "The text column of CSV / TSV / JSON Lines files (default: the first of "
    "text, sentence, text_a, sentence1, query).",
)
flags.DEFINE_string(
    "id_column", None, "The id column (default: the row's line number)."
)
flags.DEFINE_string(
    "eval_file",
    None,
    "--do_eval's file: sentence1, sentence2, score columns (STS-B's dev.tsv "
    "works as it is) or query, positive columns.",
)
flags.DEFINE_bool(
    "do_search", False, "Search --corpus_file for each of --query_file."
)
flags.DEFINE_string(
    "corpus_file", None, "The texts to search (as --predict_file)."
)
flags.DEFINE_string(
    "corpus_embeddings",
    None,
    "Instead of --corpus_file: an embeddings.npy of this model (its ids.txt "
    "beside it), memory-mapped.",
)
flags.DEFINE_string("query_file", None, "The queries (as --predict_file).")
flags.DEFINE_integer("top_k", 10, "Results per query.")
flags.DEFINE_integer("predict_batch_size", 32, "Texts per batch.")
flags.DEFINE_string(
    "export_dir",
    None,
    "Write a serving SavedModel here: raw strings in, vectors out "
    "(tokenized in the graph; model.tflite too with a TF Lite "
    "--predict_runtime).",
)
shared_flags.define_flags(*shared_flags.FINE_TUNING)
shared_flags.define_flags(*shared_flags.LONG_INPUTS)
shared_flags.define_common_flags()


def main(_):
    # Imported here so that `--help` does not load TensorFlow.
    from modeling.tasks import embeddings

    embeddings.run(
        shared_flags.settings_from_flags(
            embeddings.Settings,
            # Unset: the model folder's casing.
            do_lower_case=(
                FLAGS.do_lower_case if FLAGS["do_lower_case"].present else None
            ),
        )
    )


def run():
    """Console entry point (setup.py: bert-run-embeddings)."""
    shared_flags.run_script(main, required=("init_checkpoint",))


if __name__ == "__main__":
    run()
