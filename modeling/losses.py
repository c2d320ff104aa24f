"""Every training loss, in float32 whatever the compute precision.

The formulas are the original's: the masked-LM loss is weighted by
`masked_lm_weights` and divided by their sum plus 1e-5; the next-sentence,
classifier and span losses are mean softmax cross-entropies; a regression
task (STS-B) uses the mean squared error of its single output. A
multi-label task (not in the original) uses each label's sigmoid
cross-entropy, averaged over the labels and the batch. Which of the three a
classifier uses is its task kind's choice (modeling/task_kinds.py).
"""

from keras import ops

# The MLM loss denominator is sum(weights) + this, so that a batch with no
# real predictions gives 0 and not NaN.
MLM_LOSS_EPSILON = 1e-5
# Features the training steps add to each part of a batch split into
# micro-batches (and replicas), for the losses that are a weighted mean over
# a batch's positions: the whole batch's denominator / parts, the same on
# every row, so that the mean of the parts' gradients is the whole batch's
# (each part's own weight sum would weigh its positions otherwise).
MLM_DENOMINATOR = "masked_lm_denominator"  # sum(masked_lm_weights) + 1e-5
TOKEN_DENOMINATOR = "label_mask_denominator"  # max(sum(label_mask), 1)
# The weight feature of each such loss -> (its denominator feature, the
# denominator of a whole batch's weight sum).
WHOLE_BATCH_DENOMINATORS = {
    "masked_lm_weights": (MLM_DENOMINATOR, lambda s: s + MLM_LOSS_EPSILON),
    "label_mask": (TOKEN_DENOMINATOR, lambda s: ops.maximum(s, 1.0)),
}


def whole_batch_denominators(features, parts, batch_sum):
    """`features` of one of `parts` parts of a batch, with the denominator
    feature of each weighted loss it feeds (WHOLE_BATCH_DENOMINATORS).
    `batch_sum(x)` sums a part's tensor over the whole batch (the backend's
    sum over its replicas)."""
    added = {}
    for weights_name, (name, denominator) in WHOLE_BATCH_DENOMINATORS.items():
        weights = features.get(weights_name)
        if weights is None:
            continue
        total = batch_sum(ops.sum(ops.cast(weights, "float32")))
        value = denominator(total) / parts
        added[name] = ops.full((ops.shape(weights)[0],), value)
    return dict(features, **added) if added else features


def _part_denominator(features, name, default):
    """A part's denominator feature (see WHOLE_BATCH_DENOMINATORS), else
    `default`, its own batch's."""
    value = features.get(name)
    if value is None:
        return default
    return ops.cast(value, "float32")[0]


def softmax_cross_entropy(logits, labels):
    """The softmax cross-entropy of each row's label (a classifier, each of
    a span labeler's ends, a multiple-choice model's choices).

    Args:
        logits: float Tensor [B, L].
        labels: int Tensor [B] (or [B, 1]).

    Returns:
        float32 Tensor [B].
    """
    logits = ops.cast(logits, "float32")
    labels = ops.reshape(ops.cast(labels, "int32"), (-1,))
    one_hot = ops.one_hot(labels, ops.shape(logits)[-1], dtype="float32")
    return -ops.sum(one_hot * ops.log_softmax(logits, axis=-1), axis=-1)


def squared_error(logits, labels):
    """A regression task's (STS-B) loss of each example: the squared error
    of its single output. logits float [B, 1], labels float [B]."""
    labels = ops.reshape(ops.cast(labels, "float32"), (-1,))
    return ops.square(ops.cast(logits, "float32")[:, 0] - labels)


def sigmoid_cross_entropy(logits, labels):
    """A multi-label task's loss of each example: each label's sigmoid
    cross-entropy, averaged over the labels. logits float [B, L], labels
    0/1 [B, L]."""
    logits = ops.cast(logits, "float32")
    targets = ops.cast(labels, "float32")
    # max(x, 0) - x * z + log(1 + exp(-|x|)): stable for any logit.
    nll = (
        ops.maximum(logits, 0.0)
        - logits * targets
        + ops.log1p(ops.exp(-ops.abs(logits)))
    )
    return ops.mean(nll, axis=-1)


def span_loss(start_logits, end_logits, start_positions, end_positions):
    """run_squad's loss: mean of the start and end softmax cross-entropies.

    Args:
        start_logits, end_logits: float Tensors [B, T].
        start_positions, end_positions: int Tensors [B] (or [B, 1]).

    Returns:
        float32 scalar.
    """

    start = ops.mean(softmax_cross_entropy(start_logits, start_positions))
    end = ops.mean(softmax_cross_entropy(end_logits, end_positions))
    return (start + end) / 2.0


def pretraining_losses(outputs, features):
    """The original pre-training losses, in float32.

    Args:
        outputs: dict from BertPretrainer with "masked_lm_log_probs" float32
            [B * P, V] and "next_sentence_log_probs" float32 [B, 2].
        features: dict with "masked_lm_ids" int [B, P], "masked_lm_weights"
            float [B, P] and "next_sentence_labels" int [B, 1] or [B].

    Returns:
        dict of float32 Tensors: "masked_lm_example_loss" [B * P] (unweighted
        NLL per prediction), "masked_lm_loss" sum(w * nll) / (sum(w) + 1e-5),
        "next_sentence_example_loss" [B], "next_sentence_loss" (mean) and
        "total_loss" = masked_lm_loss + next_sentence_loss.
    """
    mlm_log_probs = ops.cast(outputs["masked_lm_log_probs"], "float32")
    vocab_size = ops.shape(mlm_log_probs)[-1]
    label_ids = ops.reshape(ops.cast(features["masked_lm_ids"], "int32"), (-1,))
    label_weights = ops.reshape(
        ops.cast(features["masked_lm_weights"], "float32"), (-1,)
    )
    one_hot = ops.one_hot(label_ids, vocab_size, dtype="float32")
    mlm_example_loss = -ops.sum(mlm_log_probs * one_hot, axis=-1)
    denominator = _part_denominator(
        features, MLM_DENOMINATOR, ops.sum(label_weights) + MLM_LOSS_EPSILON
    )
    mlm_loss = ops.sum(label_weights * mlm_example_loss) / denominator

    nsp_log_probs = ops.cast(outputs["next_sentence_log_probs"], "float32")
    nsp_labels = ops.reshape(
        ops.cast(features["next_sentence_labels"], "int32"), (-1,)
    )
    nsp_one_hot = ops.one_hot(nsp_labels, 2, dtype="float32")
    nsp_example_loss = -ops.sum(nsp_log_probs * nsp_one_hot, axis=-1)
    nsp_loss = ops.mean(nsp_example_loss)
    return {
        "masked_lm_example_loss": mlm_example_loss,
        "masked_lm_loss": mlm_loss,
        "next_sentence_example_loss": nsp_example_loss,
        "next_sentence_loss": nsp_loss,
        "total_loss": mlm_loss + nsp_loss,
    }


def token_classification_loss(logits, label_ids, label_mask, features=None):
    """run_ner's loss: softmax cross-entropy averaged over the labelled
    pieces (the first WordPiece of each word); other positions, [CLS],
    [SEP] and padding have label_mask 0. A batch without any labelled
    piece gives 0.

    Args:
        logits: float Tensor [B, T, L].
        label_ids: int Tensor [B, T].
        label_mask: 0/1 Tensor [B, T].
        features: the batch's features, for the denominator of a part of a
            larger batch (TOKEN_DENOMINATOR), if any.

    Returns:
        float32 scalar.
    """
    num_labels = ops.shape(logits)[-1]
    nll = softmax_cross_entropy(
        ops.reshape(logits, (-1, num_labels)), ops.reshape(label_ids, (-1,))
    )
    mask = ops.reshape(ops.cast(label_mask, "float32"), (-1,))
    denominator = _part_denominator(
        features or {}, TOKEN_DENOMINATOR, ops.maximum(ops.sum(mask), 1.0)
    )
    return ops.sum(nll * mask) / denominator


def multiple_choice_loss(logits, labels):
    """run_multiple_choice's loss: the mean softmax cross-entropy over each
    example's choices (logits [B, C], labels int [B]); the classifier's
    formula with the choices as classes."""
    return ops.mean(softmax_cross_entropy(logits, labels))


# Sentence-embedding losses (run_embeddings.py --do_train), with
# sentence-transformers' default scale: cosine similarities times 20.
EMBEDDING_LOSS_SCALE = 20.0


def _cosine_matrix(a, b):
    """Cosine similarity of every row of a [N, H] with every row of b
    [M, H]: float32 [N, M]."""
    a = ops.cast(a, "float32")
    b = ops.cast(b, "float32")
    a = a / ops.maximum(ops.norm(a, axis=-1, keepdims=True), 1e-12)
    b = b / ops.maximum(ops.norm(b, axis=-1, keepdims=True), 1e-12)
    return ops.matmul(a, ops.transpose(b))


def multiple_negatives_ranking_loss(
    anchors, candidates, scale=EMBEDDING_LOSS_SCALE
):
    """In-batch negatives (sentence-transformers'
    MultipleNegativesRankingLoss): each anchor's positive must score above
    every other candidate of the batch, the softmax cross-entropy of the
    scaled cosine similarities.

    Args:
        anchors: float [B, H].
        candidates: float [B * k, H]: the B positives (anchor i's is row
            i), then any hard negatives.

    Returns:
        float32 scalar, the mean over the anchors.
    """
    logits = scale * _cosine_matrix(anchors, candidates)
    labels = ops.arange(ops.shape(anchors)[0])
    return ops.mean(softmax_cross_entropy(logits, labels))


def cosent_loss(a, b, scores, scale=EMBEDDING_LOSS_SCALE):
    """CoSENT (sentence-transformers' CoSentLoss) for scored pairs: every
    pair (i, j) with score_i > score_j adds exp(scale * (cos_j - cos_i)),
    loss = log(1 + sum of them); only the ranking of the similarities
    counts, not their values.

    Args:
        a, b: float [B, H], the two sides of the pairs; scores: float [B].

    Returns:
        float32 scalar.
    """
    a = ops.cast(a, "float32")
    b = ops.cast(b, "float32")
    cosine = ops.sum(a * b, axis=-1) / ops.maximum(
        ops.norm(a, axis=-1) * ops.norm(b, axis=-1), 1e-12
    )
    scores = ops.cast(scores, "float32")
    differences = scale * (cosine[None, :] - cosine[:, None])
    ordered = ops.cast(scores[:, None] > scores[None, :], "float32")
    # Pairs out of order contribute; the others are pushed to -inf-ish.
    differences = differences - (1.0 - ordered) * 1e12
    flat = ops.concatenate(
        [ops.zeros((1,), "float32"), ops.reshape(differences, (-1,))]
    )
    return ops.logsumexp(flat)
