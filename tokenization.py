"""`import tokenization` as in the original: this is modeling/text/tokenization."""

import sys

from modeling.text import tokenization

# Original users also reach the private helpers (`_is_control`, ...).
sys.modules[__name__] = tokenization
