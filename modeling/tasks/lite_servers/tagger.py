"""A tagger served without TensorFlow (lite.LiteTagger)."""

import numpy as np

from modeling.data import conll
from modeling.tasks import predictions
from modeling.tasks.lite_servers import base
from modeling.training import predictor


class LiteTagger(base.LiteServer):
    """A tagger export (run_ner.py's --export_dir written with
    --predict_runtime=tflite or tflite_int8), ready to predict: its
    model.tflite gives each window's logits per position, the Python
    tokenizer and run_ner's windows (conll.sentence_arrays) the features,
    and each word gets the tag of its first piece, as --do_predict does.

    Args, Raises: as base.LiteServer's.
    """

    task = "token_classification"
    script = "run_ner.py"
    output = "logits"

    def __init__(self, export_dir, batch_size=32, num_threads=None):
        super().__init__(export_dir, batch_size, num_threads)
        self.labels = self.info["labels"]

    def predict(self, texts):
        """Tags of each text (words split at white space), or of each list
        of words: [{"tokens": [...], "tags": [...]}], as run_ner's
        predictions.jsonl lines without their id."""
        sentences = [
            conll.Sentence(
                list(t.split() if isinstance(t, str) else t),
                None,
                [],
            )
            for t in base.text_list(texts, item="words")
        ]
        return [
            {"tokens": s.words, "tags": tags}
            for s, tags in zip(
                sentences, self.tag_sentences(sentences), strict=True
            )
        ]

    def tag_sentences(self, sentences):
        """One tag per word of each conll.Sentence (an empty one: none;
        the tags a file to predict may hold are not read)."""
        words = [
            conll.Sentence(s.words, None, s.line_numbers)
            for s in sentences
            if s.words
        ]
        arrays, features = conll.sentence_arrays(
            words, self.labels, self.max_seq_length, self.tokenizer
        )
        tags = iter([])
        if features:
            _, outputs = self.predictor.gather(
                {k: arrays[k] for k in predictor.MODEL_FEATURES},
                width=self.max_seq_length,
                seq_outputs=("logits",),
                what="Tagging",
                unit="windows",
            )
            predicted = np.argmax(outputs["logits"], axis=-1)
            tags = iter(
                conll.word_predictions(features, predicted, words, self.labels)
            )
        return [next(tags) if s.words else [] for s in sentences]

    def predict_file(self, input_file, output_file, **columns):
        """predict_file of a tagger: a CoNLL-style or JSON Lines file read as
        run_ner.py's --predict_file, its sentences' tags as run_ner's
        predictions.jsonl lines."""
        # The words alone (any tags there are not read), under the field
        # run_ner was trained with (JSON Lines).
        data = conll.read_tagged_file(
            input_file,
            tokens_field=self.info.get("tokens_field", "tokens"),
            words_only=True,
        )

        def lines(block):
            for sentence, tags in zip(
                block, self.tag_sentences(block), strict=True
            ):
                yield predictions.line(
                    {"id": sentence.id, "tokens": sentence.words, "tags": tags}
                )

        return base.write_lines(
            output_file, data.sentences, lines, "Tagged %d sentences"
        )
