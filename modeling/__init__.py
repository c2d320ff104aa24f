"""The BERT library behind the original scripts (see modeling/README.md).

Import submodules directly (`from modeling import tokenization`); the public
names are re-exported here.
"""
