"""Each script's Settings: the one declaration of its flags (names,
defaults, help, choices; modeling/options.py), importable without
TensorFlow so that the scripts define their flags from them before parsing.
The task modules (modeling/tasks/X.py) re-export them as `X.Settings`."""
