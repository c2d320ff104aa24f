"""Settings fields that are also command-line flags, declared once.

A task's Settings dataclass is the one declaration of its script's flags:
a field made with `option(default, help)` is the flag of the same name, with
that default and help; modeling/flags.py defines the absl flags from the
fields (`define_settings_flags`) and reads them back into the dataclass
(`settings_from_flags`). A field made any other way is not a flag, so a
subclass that redeclares an inherited option without `option()` takes the
flag out of its script.

The flag's type is the field's annotation without None: bool, int, float or
str (anything else, such as `float | str`, parses as a string); `choices`
makes it an enum. A required field (no default) is a flag with default None
that the script marks required.

No TensorFlow, no absl: the scripts import Settings before parsing, so that
`--help` loads neither.
"""

import dataclasses
import types
import typing

# The annotations a flag can parse, by the absl flag type they get.
_KINDS = {bool: "bool", int: "int", float: "float", str: "string"}


def option(
    default=dataclasses.MISSING, help="", *, choices=None, flag=None, kind=None
):
    """A Settings field that is also a flag.

    Args:
      default: the field's and the flag's default; left out: a required
        field (the flag's default is None).
      help: the flag's help text.
      choices: the allowed values (an enum flag); None: any value.
      flag: the flag's name when it is not the field's (RunConfig's
        optimizer_type is --optimizer).
      kind: "bool", "int", "float" or "string" where the flag parses other
        than the annotation says (a float field given whole seconds).
    """
    metadata = {"help": help, "choices": choices, "flag": flag, "kind": kind}
    return dataclasses.field(default=default, metadata=metadata)


def nested(cls):
    """A Settings field (default None) that holds a `cls` built from the
    flags of `cls`'s own option fields: a Settings' `run_config`."""
    return dataclasses.field(default=None, metadata={"options": cls})


@dataclasses.dataclass(frozen=True)
class Flag:
    """What one option field declares: the flag's name, type, default,
    help and choices, and the field it fills."""

    name: str
    field: str
    kind: str
    default: typing.Any
    help: str
    choices: tuple | None


def flags_of(cls):
    """The flags a Settings dataclass declares, in field order, those of
    its `nested` fields' classes after its own. A name declared twice is
    one flag, the first declaration's (an outer Settings field wins over
    its run_config's), and fills every field of that name.

    Raises:
      TypeError: `cls` is not a dataclass.
    """
    hints = typing.get_type_hints(cls)
    out = []
    inner = []
    for field in dataclasses.fields(cls):
        if "options" in field.metadata:
            inner.extend(flags_of(field.metadata["options"]))
        if "help" not in field.metadata or not field.init:
            continue
        meta = field.metadata
        default = field.default
        if default is dataclasses.MISSING:
            default = None
        choices = meta["choices"]
        kind = "enum" if choices else meta["kind"] or _kind(hints[field.name])
        out.append(
            Flag(
                name=meta["flag"] or field.name,
                field=field.name,
                kind=kind,
                default=default,
                help=meta["help"],
                choices=tuple(choices) if choices else None,
            )
        )
    names = {flag.name for flag in out}
    return out + [flag for flag in inner if flag.name not in names]


def _kind(annotation):
    """bool, int, float or string: the annotation without None."""
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in args if a is not type(None)]
        annotation = args[0] if len(args) == 1 else str
    return _KINDS.get(annotation, "string")


# === The options of several scripts' Settings ===
#
# The original's model and data flags that Settings on different floors
# share (create_pretraining_data's beside the model runners'): each declared
# here once; a field takes it as `vocab_file: str = options.vocab_file()`.
# The runners' other shared flags are fields of tasks/settings/common.py's
# classes and of training/run_config.py's RunConfig.


def bert_config_file(default=None):
    return option(
        default,
        "The config json file corresponding to the pre-trained BERT model. "
        "This specifies the model architecture.",
    )


def init_checkpoint(default=None):
    return option(
        default, "Initial checkpoint (usually from a pre-trained BERT model)."
    )


def vocab_file(default=dataclasses.MISSING):
    return option(
        default, "The vocabulary file that the BERT model was trained on."
    )


def do_lower_case(default=True):
    return option(
        default,
        "Whether to lower case the input text. Should be True for uncased "
        "models and False for cased models.",
    )


def train_batch_size(default=32):
    return option(default, "Total batch size for training.")


def eval_batch_size(default=8):
    return option(default, "Total batch size for eval.")


# The generator's masking flags (create_pretraining_data, and
# run_pretraining --input_format=text).


def do_whole_word_mask():
    return option(
        False,
        "Whether to use whole word masking rather than per-WordPiece masking.",
    )


def masked_lm_prob():
    return option(0.15, "Masked LM probability.")


def short_seq_prob():
    return option(
        0.1,
        "Probability of creating sequences which are shorter than the "
        "maximum length.",
    )
