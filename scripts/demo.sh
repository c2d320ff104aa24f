#!/usr/bin/env bash
# The README's main command: pre-train a small BERT from scratch on a public-
# domain corpus shipped in the repository, then evaluate it, all offline.
#   1. create_pretraining_data.py on tests/testdata/train_corpus.txt (300 KB of
#      Jane Austen's "Emma", Project Gutenberg via NLTK's corpus) with the
#      project's 8k uncased WordPiece vocabulary (vocab/books_uncased_8k.txt),
#   2. run_pretraining.py --do_train --do_eval of a 2-layer, 128-wide BERT
#      (scripts/demo_bert_config.json) for DEMO_STEPS steps,
#   3. prints eval_results.txt (masked-LM and next-sentence accuracy).
# Outputs go to demo_output/. Re-running resumes from the last checkpoint
# (delete demo_output/ to start over). About 4 minutes on 2 CPU cores.
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"

OUT="${DEMO_OUTPUT:-demo_output}"
STEPS="${DEMO_STEPS:-1500}"
mkdir -p "$OUT"

if [ ! -f "$OUT/pretraining.tfrecord" ]; then
  python create_pretraining_data.py \
    --input_file=tests/testdata/train_corpus.txt \
    --output_file="$OUT/pretraining.tfrecord" \
    --vocab_file=vocab/books_uncased_8k.txt \
    --do_lower_case=True \
    --max_seq_length=64 \
    --max_predictions_per_seq=10 \
    --masked_lm_prob=0.15 \
    --random_seed=12345 \
    --dupe_factor=5 \
    2> "$OUT/create_pretraining_data.log"
fi

python run_pretraining.py \
  --input_file="$OUT/pretraining.tfrecord" \
  --output_dir="$OUT/pretraining_output" \
  --do_train=True \
  --do_eval=True \
  --bert_config_file=scripts/demo_bert_config.json \
  --train_batch_size=32 \
  --eval_batch_size=32 \
  --max_seq_length=64 \
  --max_predictions_per_seq=10 \
  --num_train_steps="$STEPS" \
  --num_warmup_steps=100 \
  --learning_rate=5e-4 \
  --save_checkpoints_steps=500 \
  --iterations_per_loop=100 \
  --max_eval_steps=20 \
  --random_seed=12345 \
  2>&1 | tee "$OUT/run_pretraining.log" | grep --line-buffered -E "step [0-9]+(/[0-9]+ \([0-9]+%\))?:|Eval results|  [a-z_]+ = "

echo
echo "== $OUT/pretraining_output/eval_results.txt =="
cat "$OUT/pretraining_output/eval_results.txt"
