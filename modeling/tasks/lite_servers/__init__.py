"""The LiteRT servers of modeling/tasks/lite.py, one module per task, on
the shared export reader of base.py."""
