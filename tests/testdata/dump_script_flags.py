"""Prints a script's flags as JSON: {name: {type, default, help, choices,
module}} for every flag it defines beyond absl's own (tests/flags_test.py)."""

import importlib
import json
import sys

from absl import flags

FLAGS = flags.FLAGS
ABSL_OWN = set(FLAGS)
importlib.import_module(sys.argv[1])
out = {}
for name in sorted(set(FLAGS) - ABSL_OWN):
    if FLAGS.find_module_defining_flag(name).startswith("absl."):
        continue
    flag = FLAGS[name]
    out[name] = {
        "type": flag.flag_type(),
        "default": flag.default,
        "help": flag.help,
        "choices": getattr(flag.parser, "enum_values", None),
        "module": FLAGS.find_module_defining_flag(name),
    }
print(json.dumps(out, indent=1, sort_keys=True))
