"""A sentence-embedding model served without TensorFlow
(lite.LiteEmbedder)."""

from modeling.data import long_inputs as long_inputs_lib
from modeling.data import table_files
from modeling.tasks import predictions
from modeling.tasks.lite_servers import base


class LiteEmbedder(base.LiteServer):
    """A sentence-embedding export (run_embeddings.py's --export_dir written
    with --predict_runtime=tflite or tflite_int8), ready to embed: the
    original's single-text features, its model.tflite's pooled vectors
    through the one predictor.

    Args, Raises: as base.LiteServer's.
    """

    task = "embeddings"
    script = "run_embeddings.py"
    output = "embeddings"

    def __init__(self, export_dir, batch_size=32, num_threads=None):
        super().__init__(export_dir, batch_size, num_threads)
        self.dimensions = self.info["dimensions"]
        self.normalize = self.info.get("normalize", True)
        self.long_inputs = long_inputs_lib.LongInputs.from_json(self.info)

    def encode(self, texts):
        """float32 [N, dimensions]: each text's vector, in input order."""
        return self.predictor.embed(
            self.tokenizer,
            self.max_seq_length,
            base.text_list(texts),
            self.dimensions,
            long_inputs=self.long_inputs,
            normalize=self.normalize,
        )

    def predict(self, texts):
        """[{"embedding": [floats]}] per text: predictions.jsonl records
        without their id."""
        return [
            {"embedding": [predictions.number(v) for v in row]}
            for row in self.encode(texts)
        ]

    column_flags = ("text_a_column", "id_column")

    def predict_file(
        self,
        input_file,
        output_file,
        text_a_column=None,
        id_column=None,
        **columns,
    ):
        """predict_file of an embedding model: texts read as run_embeddings.py
        reads them (.txt, or CSV / TSV / JSON Lines with a text column), one
        {"id", "embedding"} line each."""
        rows = table_files.TextFile(
            input_file, text_a_column, id_column, text_flag="text_a_column"
        ).rows()

        def lines(chunk):
            ids, texts = zip(*chunk, strict=True)
            for row_id, record in zip(ids, self.predict(texts), strict=True):
                yield predictions.line({"id": row_id, **record})

        return base.write_lines(
            output_file, rows, lines, "Embedded %d texts", input_file
        )
