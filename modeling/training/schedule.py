"""The fine-tuning step arithmetic of the original's runners, TF-free.

run_classifier.py trains `int(num_examples / train_batch_size *
num_train_epochs)` steps and warms up for `int(num_train_steps *
warmup_proportion)` of them; the other fine-tuning runners and the Keras
text classifier's default optimizer count the same way. No TensorFlow here:
tasks/common.py, which the scripts import before parsing flags, uses it.
"""


def num_train_steps(num_examples, batch_size, num_epochs):
    """int(num_examples / batch_size * num_epochs), as the original."""
    return int(num_examples / batch_size * num_epochs)


def num_warmup_steps(num_train_steps, warmup_proportion):
    """int(num_train_steps * warmup_proportion), as the original."""
    return int(num_train_steps * warmup_proportion)
