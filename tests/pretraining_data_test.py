"""Unit tests of modeling/pretraining_data/generation*.py on a toy vocabulary.

The exactness oracle is `_reference_instances`: the original's algorithm
written out plainly on string tokens, rule by rule as the original does
it. The golden tests against the original
release itself are in create_pretraining_data_test.py.
"""

import collections
import itertools
import random

import pytest
import tensorflow as tf

from modeling.data import input_pipeline
from modeling.pretraining_data import generation
from modeling.pretraining_data import records
from modeling.pretraining_data import rng as rng_lib
from modeling.pretraining_data import shards as shards_lib
from modeling.pretraining_data import text as text_lib

SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS = [f"w{i}" for i in range(150)] + [f"##c{i}" for i in range(20)]
# A duplicate: the random-word pool keeps the first place, the id the last.
TOY_VOCAB = collections.OrderedDict()
for _index, _token in enumerate(SPECIAL + WORDS + ["w3"]):
    TOY_VOCAB[_token] = _index


# === The oracle: the original algorithm on string tokens ===


def _truncate(tokens_a, tokens_b, max_num_tokens, rng):
    while len(tokens_a) + len(tokens_b) > max_num_tokens:
        trunc = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
        if rng.random() < 0.5:
            del trunc[0]
        else:
            trunc.pop()


def _masked_lm(tokens, opts, vocab_words, rng):
    cand = []
    for i, token in enumerate(tokens):
        if token in ("[CLS]", "[SEP]"):
            continue
        if opts.do_whole_word_mask and cand and token.startswith("##"):
            cand[-1].append(i)
        else:
            cand.append([i])
    rng.shuffle(cand)
    out = list(tokens)
    budget = min(
        opts.max_predictions_per_seq,
        max(1, round(len(tokens) * opts.masked_lm_prob)),
    )
    masked, covered = [], set()
    for group in cand:
        if len(masked) >= budget:
            break
        if len(masked) + len(group) > budget:
            continue
        if any(i in covered for i in group):
            continue
        for i in group:
            covered.add(i)
            if rng.random() < 0.8:
                out[i] = "[MASK]"
            elif rng.random() < 0.5:
                out[i] = tokens[i]
            else:
                out[i] = vocab_words[rng.randint(0, len(vocab_words) - 1)]
            masked.append((i, tokens[i]))
    masked.sort()
    return out, [i for i, _ in masked], [t for _, t in masked]


def _from_document(docs, di, opts, vocab_words, rng):
    doc = docs[di]
    max_num_tokens = opts.max_seq_length - 3
    target = max_num_tokens
    if rng.random() < opts.short_seq_prob:
        target = rng.randint(2, max_num_tokens)
    out, chunk, length, i = [], [], 0, 0
    while i < len(doc):
        chunk.append(doc[i])
        length += len(doc[i])
        if i == len(doc) - 1 or length >= target:
            a_end = rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1
            a = [t for seg in chunk[:a_end] for t in seg]
            b = []
            if len(chunk) == 1 or rng.random() < 0.5:
                is_random = True
                for _ in range(10):
                    rdi = rng.randint(0, len(docs) - 1)
                    if rdi != di:
                        break
                rdoc = docs[rdi]
                for seg in rdoc[rng.randint(0, len(rdoc) - 1) :]:
                    b.extend(seg)
                    if len(b) >= target - len(a):
                        break
                i -= len(chunk) - a_end
            else:
                is_random = False
                b = [t for seg in chunk[a_end:] for t in seg]
            _truncate(a, b, max_num_tokens, rng)
            tokens = ["[CLS]", *a, "[SEP]", *b, "[SEP]"]
            masked = _masked_lm(tokens, opts, vocab_words, rng)
            out.append((*masked, len(a), len(b), is_random))
            chunk, length = [], 0
        i += 1
    return out


def _reference_instances(docs, opts, vocab, rng):
    vocab_words = list(vocab.keys())
    rng.shuffle(docs)
    instances = []
    for _ in range(opts.dupe_factor):
        for di in range(len(docs)):
            instances.extend(_from_document(docs, di, opts, vocab_words, rng))
    rng.shuffle(instances)
    return instances


def _toy_documents(seed, num_docs, max_segments=8, max_len=30):
    rng = random.Random(seed)
    docs = []
    for _ in range(num_docs):
        doc = []
        for _ in range(rng.randint(1, max_segments)):
            seg = [rng.choice(WORDS[:150])]
            for _ in range(rng.randint(0, max_len)):
                seg.append(rng.choice(WORDS))
            doc.append(seg)
        docs.append(doc)
    return docs


OPTION_CASES = {
    "defaults": {"dupe_factor": 2},
    "short_and_truncated": {
        "max_seq_length": 16,
        "max_predictions_per_seq": 4,
        "short_seq_prob": 0.5,
    },
    "whole_word": {
        "do_whole_word_mask": True,
        "max_seq_length": 24,
        "max_predictions_per_seq": 5,
    },
    "all_short_high_prob": {
        "short_seq_prob": 1.0,
        "masked_lm_prob": 0.5,
        "max_predictions_per_seq": 40,
    },
}


@pytest.mark.parametrize("name", sorted(OPTION_CASES))
@pytest.mark.parametrize("num_docs", [1, 2, 12])
def test_generate_records_equals_reference(name, num_docs):
    opts = generation.GenerationOptions(
        random_seed=num_docs, **OPTION_CASES[name]
    )
    docs = _toy_documents(seed=num_docs, num_docs=num_docs)
    ref_rng, rng = (
        random.Random(opts.random_seed),
        random.Random(opts.random_seed),
    )
    expected = _reference_instances(
        [list(d) for d in docs], opts, TOY_VOCAB, ref_rng
    )
    id_docs = [[tuple(TOY_VOCAB[t] for t in seg) for seg in d] for d in docs]
    vocab_ids = generation.VocabIds(TOY_VOCAB)
    corpus = text_lib.Corpus.from_documents(id_docs, vocab_ids.num_ids)
    store, order = generation.generate_instances(corpus, opts, vocab_ids, rng)
    assert rng.getstate() == ref_rng.getstate()
    encoder = records.RecordEncoder(
        opts.max_seq_length, opts.max_predictions_per_seq, vocab_ids
    )
    got = list(encoder.encode_stored(corpus, store, order, batch_size=7))
    assert len(got) == len(store) == len(expected) > 0
    for record, exp in zip(got, expected):
        tokens, pos, labels, len_a, len_b, rand = exp
        ids = [TOY_VOCAB[t] for t in tokens]
        labels = [TOY_VOCAB[t] for t in labels]
        assert record == _serialize_like_the_original(
            ids,
            len_a,
            len_b,
            pos,
            labels,
            rand,
            opts.max_seq_length,
            opts.max_predictions_per_seq,
        )


def test_one_document_corpus_gives_random_next_from_itself():
    # As the original: after 10 misses B comes from the same document, label 1.
    opts = generation.GenerationOptions(dupe_factor=1)
    vocab_ids = generation.VocabIds(TOY_VOCAB)
    corpus = text_lib.Corpus.from_documents([[(10, 11, 12)]], vocab_ids.num_ids)
    store, _ = generation.generate_instances(
        corpus, opts, vocab_ids, random.Random(3)
    )
    assert len(store) == 1
    assert store.meta.tolist()[:5] == [0, 3, 0, 3, 1]


@pytest.mark.parametrize("n", [1, 2, 3, 4, 7, 8, 9, 64, 127, 128, 129, 700])
def test_shuffle_and_randbelow_match_cpython(n):
    for seed in range(5):
        ref, ours = random.Random(seed), random.Random(seed)
        x, y = list(range(n)), list(range(n))
        ref.shuffle(x)
        rng_lib.shuffle(y, ours.getrandbits)
        assert x == y
        assert ref.randint(0, n - 1) == rng_lib.randbelow(n, ours.getrandbits)
        assert ref.getstate() == ours.getstate()


def _serialize_like_the_original(
    ids, len_a, len_b, pos, labels, rand, seq, preds
):
    pad = seq - len(ids)
    ppad = preds - len(pos)
    ip = input_pipeline
    features = collections.OrderedDict()
    features["input_ids"] = ip.int_feature(ids + [0] * pad)
    features["input_mask"] = ip.int_feature([1] * len(ids) + [0] * pad)
    features["segment_ids"] = ip.int_feature(
        [0] * (len_a + 2) + [1] * (len_b + 1) + [0] * pad
    )
    features["masked_lm_positions"] = ip.int_feature(pos + [0] * ppad)
    features["masked_lm_ids"] = ip.int_feature(labels + [0] * ppad)
    features["masked_lm_weights"] = ip.float_feature(
        [1.0] * len(pos) + [0.0] * ppad
    )
    features["next_sentence_labels"] = ip.int_feature([1 if rand else 0])
    return ip.serialize_example(features)


@pytest.mark.parametrize(
    "seq,preds,num_ids", [(128, 20, 30522), (512, 80, 250000)]
)
def test_record_encoder_bytes_equal_serialize_example(seq, preds, num_ids):
    encoder = records.RecordEncoder(seq, preds, _FakeVocabIds(num_ids))
    rng = random.Random(seq)
    for _ in range(200):
        len_a = rng.randint(1, seq - 4)
        len_b = rng.randint(1, seq - 3 - len_a)
        n = len_a + len_b + 3
        ids = [rng.randrange(num_ids) for _ in range(n)]
        pos = sorted(rng.sample(range(n), rng.randint(1, min(preds, n))))
        labels = [rng.randrange(num_ids) for _ in pos]
        rand = rng.random() < 0.5
        instance = (ids, len_a, len_b, pos, labels, rand)
        expected = _serialize_like_the_original(*instance, seq, preds)
        assert encoder.encode(*instance) == expected


class _FakeVocabIds:
    def __init__(self, num_ids):
        self.num_ids, self.cls_id, self.sep_id = num_ids, 2, 3


@pytest.mark.parametrize("seq,preds,num_ids", [(32, 6, 200), (512, 80, 250000)])
def test_encode_stored_equals_encode(seq, preds, num_ids):
    rng = random.Random(seq)
    docs = [[tuple(rng.randrange(5, num_ids) for _ in range(seq))]]
    corpus = text_lib.Corpus.from_documents(docs * 3, num_ids)
    store = generation.InstanceStore()
    expected = []
    encoder = records.RecordEncoder(seq, preds, _FakeVocabIds(num_ids))
    tokens = corpus.tokens.tolist()
    for _ in range(60):
        len_a = rng.randint(1, seq - 4)
        len_b = rng.randint(1, seq - 3 - len_a)
        a, b = rng.randrange(2 * seq), rng.randrange(2 * seq)
        ids = [2, *tokens[a : a + len_a], 3, *tokens[b : b + len_b], 3]
        pos = rng.sample([p for p in range(len(ids)) if ids[p] > 3], 3)
        out = [rng.choice([4, generation.KEEP, 77]) for _ in pos]
        rand = rng.randint(0, 1)
        store.append(a, len_a, b, len_b, rand, pos, out)
        labels = [ids[p] for p in sorted(pos)]
        for p, o in zip(pos, out):
            ids[p] = ids[p] if o == generation.KEEP else o
        expected.append(
            encoder.encode(ids, len_a, len_b, sorted(pos), labels, rand)
        )
    order = list(range(60))
    random.Random(1).shuffle(order)
    got = list(encoder.encode_stored(corpus, store, order, batch_size=16))
    assert got == [expected[i] for i in order]


@pytest.mark.parametrize(
    "field,value,message",
    [
        ("max_seq_length", 4, "max_seq_length=4: must be >= 5"),
        ("max_predictions_per_seq", 0, "max_predictions_per_seq=0"),
        ("masked_lm_prob", -0.5, "masked_lm_prob=-0.5"),
        ("masked_lm_prob", 1.5, "masked_lm_prob=1.5"),
        ("short_seq_prob", -0.1, "short_seq_prob=-0.1"),
        ("dupe_factor", 0, "dupe_factor=0"),
    ],
)
def test_options_validate_names_the_field(field, value, message):
    opts = generation.GenerationOptions(**{field: value})
    with pytest.raises(ValueError, match=message):
        opts.validate()


def test_vocab_without_mask_is_an_error():
    vocab = collections.OrderedDict((t, i) for i, t in enumerate(SPECIAL[:4]))
    with pytest.raises(ValueError, match=r"lacks \[MASK\]"):
        generation.VocabIds(vocab)


def test_vocab_ids_keep_the_originals_word_pool():
    ids = generation.VocabIds(TOY_VOCAB)
    # "w3" is listed at its first place but has its last line's id.
    first_place = len(SPECIAL) + 3
    assert ids.random_word_ids[first_place] == TOY_VOCAB["w3"] == 175
    assert len(ids.random_word_ids) == len(TOY_VOCAB)
    assert ids.is_continuation[TOY_VOCAB["##c0"]] == 1
    assert ids.is_continuation[TOY_VOCAB["w0"]] == 0


# === Reading text ===


class _SplitTokenizer:
    """A toy FullTokenizer: words are vocab tokens, split on whitespace."""

    def __init__(self):
        self.vocab = TOY_VOCAB

        class _Basic:
            @staticmethod
            def split_words(text):
                # Mimics _clean_text deleting U+200B and U+FFFD.
                return text.replace("\u200b", "").replace("\ufffd", "").split()

        self.basic_tokenizer = _Basic()

    def tokenize(self, text):
        return self.basic_tokenizer.split_words(text)

    def convert_tokens_to_ids(self, tokens):
        return [self.vocab[t] for t in tokens]


def _read(tmp_path, contents, decode_errors="strict", processes=1, shard=64):
    paths = []
    for i, data in enumerate(contents):
        path = tmp_path / f"in{i}.txt"
        path.write_bytes(data)
        paths.append(str(path))
    line_tokenizer = text_lib.LineTokenizer(_SplitTokenizer())
    corpus, stats = text_lib.read_corpus(
        paths, line_tokenizer, 200, decode_errors, processes, shard
    )
    docs = [corpus.segments(d) for d in range(len(corpus.documents))]
    return docs, stats


# Tiny shards cut documents anywhere; the result must not change.
@pytest.mark.parametrize("processes,shard", [(1, 1 << 20), (1, 1), (2, 4)])
def test_read_corpus_follows_the_original(tmp_path, processes, shard):
    docs, stats = _read(
        tmp_path,
        [
            b"w1 w2\n  \n\n\nw3\r\rw4\n\xe2\x80\x8b\nw5",  # \r stays in a line
            b"w6\n\nw7 ##c1\n",  # No new document at a file boundary.
        ],
        processes=processes,
        shard=shard,
    )
    v = TOY_VOCAB
    assert docs == [
        [(v["w1"], v["w2"])],
        [(v["w3"], v["w4"]), (v["w5"],), (v["w6"],)],
        [(v["w7"], v["##c1"])],
    ]
    assert stats.documents == 3
    assert stats.empty_documents == 2
    assert stats.dropped_lines == 1  # The zero-width-space line.
    assert stats.lines == 10
    assert stats.tokens == 8


def test_read_corpus_logs_its_progress(tmp_path, monkeypatch, caplog):
    # Reading a large corpus takes minutes (4 MB/s a process): not in silence.
    from modeling import progress

    monkeypatch.setattr(progress, "EVERY_SECS", 0.0)
    with caplog.at_level("INFO"):
        _read(tmp_path, [b"w1 w2\n" * 8, b"w3\n"], shard=16)
    assert "Reading input (1.52588e-05 MiB shards): 2/4 shards (50%)" in (
        caplog.text
    )


@pytest.mark.parametrize("processes", [1, 2])
def test_read_corpus_rejects_bad_utf8_with_file_and_line(tmp_path, processes):
    with pytest.raises(
        ValueError, match=r"in0\.txt:3: bytes that are not UTF-8"
    ):
        _read(tmp_path, [b"w1\nw2\nw3 \xff w4\n"], processes=processes, shard=2)


@pytest.mark.parametrize("policy,expected", [("replace", 2), ("ignore", 2)])
def test_read_corpus_replaces_bad_utf8_when_asked(tmp_path, policy, expected):
    docs, stats = _read(tmp_path, [b"w1\xff\nw2 \xfe\n"], policy)
    assert stats.decode_error_lines == expected
    assert docs == [[(TOY_VOCAB["w1"],), (TOY_VOCAB["w2"],)]]


def test_plan_shards_cover_the_file_at_line_starts(tmp_path):
    lines = [f"line {i}" if i % 7 else "" for i in range(400)]
    data = ("\n".join(lines) + "\n").encode()
    path = tmp_path / "corpus.txt"
    path.write_bytes(data)
    shards = list(shards_lib.plan_shards([str(path)], 100))
    assert shards[0].start == 0 and shards[-1].end == len(data)
    for before, after in itertools.pairwise(shards):
        assert before.end == after.start
        assert data[after.start - 1 : after.start] == b"\n"
    for shard in shards:
        assert shard.first_line == data[: shard.start].count(b"\n") + 1
    assert [s.index for s in shards] == list(range(len(shards)))
    assert len(shards) > 10


@pytest.mark.parametrize(
    "newline, blank",
    [
        (b"\n", b""),
        (b"\r\n", b""),
        (b"\n", b"  "),
        (b"\n", "\u3000".encode()),  # a full-width space (CJK text)
        (b"\n", "\u00a0".encode()),
    ],
)
def test_shards_are_cut_at_document_boundaries(tmp_path, newline, blank):
    """A blank line (CRLF, or spaces on it, blank for the text reader too)
    is where a shard ends: documents are not split between shards."""
    doc = newline.join([b"one sentence here.", b"two sentences here."])
    data = (newline + blank + newline).join([doc] * 30) + newline
    path = tmp_path / "corpus.txt"
    path.write_bytes(data)
    shards = list(shards_lib.plan_shards([str(path)], 100))
    assert len(shards) > 5
    # The last cut may come after the last blank line: at a line start.
    for shard in shards[1:-1]:
        assert data[shard.start :].startswith(blank + newline), shard


def test_parsed_records_have_the_pretraining_spec():
    encoder = records.RecordEncoder(16, 3, _FakeVocabIds(200))
    record = encoder.encode([2, 7, 3, 8, 9, 3], 1, 2, [1, 4], [7, 9], True)
    spec = input_pipeline.pretraining_feature_spec(16, 3)
    parsed = tf.io.parse_single_example(record, spec)
    assert parsed["input_ids"].numpy().tolist()[:7] == [2, 7, 3, 8, 9, 3, 0]
    assert parsed["segment_ids"].numpy().tolist()[:7] == [0, 0, 0, 1, 1, 1, 0]
    assert parsed["masked_lm_weights"].numpy().tolist() == [1.0, 1.0, 0.0]
    assert parsed["next_sentence_labels"].numpy().tolist() == [1]
