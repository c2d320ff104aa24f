"""`import optimization` as in the original: its optimizer, for Keras.

The original's `create_optimizer(loss, init_lr, num_train_steps,
num_warmup_steps, use_tpu)` built a TF1 train op from a loss tensor. Here
`create_optimizer(init_lr, num_train_steps, num_warmup_steps, use_tpu)`
returns the same optimizer as a Keras optimizer, for
`model.compile(optimizer=...)` (or `optimizer.apply_gradients` in a loop):
AdamWeightDecay without bias correction, weight decay 0.01 except LayerNorm
and biases, gradients clipped to global norm 1.0, linear warmup then linear
decay to 0 at num_train_steps (modeling/training/optimization.py, which the
scripts use, checked step for step against the original's).

`AdamWeightDecayOptimizer` is that optimizer's class, with the original
class's arguments and defaults.
"""

import numbers

from modeling.training import optimization as _optimization

AdamWeightDecayOptimizer = _optimization.AdamWeightDecayOptimizer


def create_optimizer(
    init_lr,
    num_train_steps,
    num_warmup_steps,
    use_tpu=False,
    *original_args,
    optimizer_type="adamw",
):
    """The original's fine-tuning optimizer as a Keras optimizer.

    Args:
      init_lr: float, the peak learning rate.
      num_train_steps: int, where the rate reaches 0 (None: set by
        BertTextClassifier.fit from the steps it runs).
      num_warmup_steps: int, linear warmup steps.
      use_tpu: accepted for the original's signature; the distribution
        strategy, not the optimizer, decides where it runs.
      *original_args: only to recognize the original's five-argument call.
      optimizer_type: "adamw", or "lamb" for LAMB.

    Returns:
      An `AdamWeightDecayOptimizer`.

    Raises:
      TypeError: called the original's way, with a loss tensor first.
    """
    del use_tpu
    if original_args or not isinstance(init_lr, numbers.Real):
        raise TypeError(
            "create_optimizer takes (init_lr, num_train_steps, "
            "num_warmup_steps, use_tpu) and returns a Keras optimizer: the "
            "original's create_optimizer(loss, init_lr, ...) built a TF1 "
            "train op from a loss, which TensorFlow 2 has no use for. Pass "
            "the optimizer to model.compile(optimizer=...); the loss is "
            f"the model's. Got init_lr={init_lr!r}."
        )
    return _optimization.create_optimizer(
        init_lr,
        num_train_steps,
        num_warmup_steps,
        optimizer_type=optimizer_type,
    )
