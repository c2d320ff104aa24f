"""The exact mode's whole run, and the steps it shares with the scale mode.

`create_exact` is the original's `main`: read every input file into one
list of documents, make all instances with one `random.Random`, shuffle
them, write them round-robin. Same inputs, vocabulary, flags and seed give
the same records as the original (tests compare with its outputs).
"""

import dataclasses

from absl import logging

from modeling import pretraining_data
from modeling import pretraining_data_records
from modeling import pretraining_data_text


def log_read_stats(stats, input_files):
    logging.info("Read %d file(s): %s", len(input_files), stats.summary())
    if stats.decode_error_lines:
        logging.warning(
            "%d line(s) held bytes that are not UTF-8 (decoded per "
            "--decode_errors)",
            stats.decode_error_lines,
        )


def check_documents(documents, input_files):
    """Raises ValueError when there is no document to learn from."""
    if not documents:
        raise ValueError(
            "No text to make instances from: the input files hold no line "
            f"that tokenizes to anything ({', '.join(input_files)})"
        )


def write_records(records, output_files, inv_vocab, num_logged=20):
    """Writes records round-robin, atomically; logs the first `num_logged`.

    Returns:
      int, the number of records written.
    """
    with pretraining_data_records.AtomicRecordWriters(output_files) as out:
        for record in records:
            if out.num_written < num_logged:
                pretraining_data_records.log_instance(record, inv_vocab)
            out.write(record)
        if not out.num_written:
            raise ValueError("No instance was made; no output written")
        out.commit()
    logging.info("Wrote %d total instances", out.num_written)
    return out.num_written


def create_exact(
    input_files, output_files, tokenizer, options, decode_errors="strict"
):
    """The original's whole run: same records for the same inputs and seed.

    Args:
      input_files: list of str, read in this order.
      output_files: list of str; records go round-robin, from the first.
      tokenizer: tokenization.FullTokenizer.
      options: pretraining_data.GenerationOptions.
      decode_errors: "strict", "replace" or "ignore".

    Returns:
      dict of counts: instances, and ReadStats fields.

    Raises:
      ValueError: bad options, vocabulary, text or output files; no output
        file is left behind.
    """
    options.validate()
    pretraining_data_records.check_output_files(output_files, input_files)
    vocab_ids = pretraining_data.VocabIds(tokenizer.vocab)
    encoder = pretraining_data_records.RecordEncoder(
        options.max_seq_length, options.max_predictions_per_seq, vocab_ids
    )
    line_tokenizer = pretraining_data_text.LineTokenizer(tokenizer)
    documents, stats = pretraining_data_text.read_documents(
        input_files, line_tokenizer, decode_errors
    )
    log_read_stats(stats, input_files)
    check_documents(documents, input_files)
    corpus = pretraining_data.Corpus(documents, vocab_ids.num_ids)
    del documents, line_tokenizer
    rng = pretraining_data.make_rng(options.random_seed)
    store, order = pretraining_data.generate_instances(
        corpus, options, vocab_ids, rng
    )
    logging.info(
        "Made %d instances (%.1f MB of skeletons, %.1f MB of tokens)",
        len(store),
        store.nbytes / 1e6,
        corpus.tokens.itemsize * len(corpus.tokens) / 1e6,
    )
    records = encoder.encode_stored(corpus, store, order)
    written = write_records(records, output_files, tokenizer.inv_vocab)
    return {"instances": written, **dataclasses.asdict(stats)}
