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
from modeling.tasks.settings import embeddings as settings

FLAGS = flags.FLAGS

shared_flags.define_settings_flags(settings.Settings)


def main(_):
    # Imported here so that `--help` does not load TensorFlow.
    from modeling.tasks import embeddings

    embeddings.run(shared_flags.settings_from_flags(embeddings.Settings))


def run():
    """Console entry point (setup.py: bert-run-embeddings)."""
    shared_flags.run_script(main, required=("init_checkpoint",))


if __name__ == "__main__":
    run()
