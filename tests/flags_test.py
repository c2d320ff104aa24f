"""Each flag is declared once, as a Settings field (modeling/options.py), and
the scripts' flags stay as they were: names, types, defaults, help, choices
(tests/testdata/script_flags.json, written from the hand-written absl
definitions these replaced)."""

import ast
import dataclasses
import json
import pathlib
import typing

import pytest
import script_runner

from modeling import options
from modeling.options import option

ROOT = pathlib.Path(__file__).resolve().parent.parent
SNAPSHOT = ROOT / "tests" / "testdata" / "script_flags.json"
DUMP = ROOT / "tests" / "testdata" / "dump_script_flags.py"
SCRIPTS = sorted(json.loads(SNAPSHOT.read_text()))


def _run(args, check=True):
    proc = script_runner.python(args)
    if check:
        assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


@pytest.mark.parametrize("script", SCRIPTS)
def test_the_scripts_flags_are_unchanged(script):
    want = json.loads(SNAPSHOT.read_text())[script]
    got = json.loads(_run([str(DUMP), script]))
    assert sorted(got) == sorted(want)
    for name in want:
        assert got[name] == want[name], name


def test_only_modeling_flags_defines_absl_flags():
    # The scripts and the library; vocab/ is a separate tool.
    files = sorted(ROOT.glob("*.py")) + sorted(ROOT.glob("modeling/**/*.py"))
    offenders = []
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                name = ast.unparse(node.func)
                if "DEFINE" in name and path.name != "flags.py":
                    offenders.append(f"{path.relative_to(ROOT)}: {name}")
    assert offenders == []


def test_help_lists_every_flag_of_the_script():
    # Registered under the script: `--help` shows the shared flags too, as
    # the original's scripts (each defined all its flags) did.
    # (absl's --help exits with status 1.)
    text = _run(["run_ner.py", "--help"], check=False)
    want = json.loads(SNAPSHOT.read_text())["run_ner"]
    missing = [
        name
        for name in want
        if f"--{name}" not in text and f"--[no]{name}" not in text
    ]
    assert missing == []


def test_words_after_the_flags_are_an_error_not_dropped(tmp_path):
    """`--do_lower_case False` (a space, not "="): absl takes the flag as
    true and leaves "False" to main, which dropped it: the run lower-cased
    silently. Now one line naming it, before any work."""
    proc = script_runner.python(
        [
            "extract_features.py",
            f"--input_file={tmp_path / 'in.txt'}",
            f"--output_file={tmp_path / 'out.jsonl'}",
            "--vocab_file=v.txt",
            "--bert_config_file=c.json",
            "--init_checkpoint=x",
            "--do_lower_case",
            "False",
        ]
    )
    assert proc.returncode == 1
    assert (
        proc.stderr.strip()
        .splitlines()[-1]
        .startswith(
            "error: unexpected argument 'False': give each flag as --flag=value"
        )
    )


def test_help_of_an_installed_command_and_of_the_tfhub_script():
    """`bert-run-ner --help` (a console wrapper: its flags were registered
    under the module, not the program) listed none, and
    run_classifier_with_tfhub.py --help only its own one."""
    want = json.loads(SNAPSHOT.read_text())
    wrapper = (
        "import sys\n"
        "import run_ner\n"
        "sys.argv = ['bert-run-ner', '--help']\n"
        "run_ner.run()\n"
    )
    for text, script in (
        (_run(["-c", wrapper], check=False), "run_ner"),
        (
            _run(["run_classifier_with_tfhub.py", "--help"], check=False),
            "run_classifier_with_tfhub",
        ),
    ):
        missing = [
            name
            for name in want[script]
            if f"--{name}" not in text and f"--[no]{name}" not in text
        ]
        assert missing == [], script


@dataclasses.dataclass(kw_only=True)
class _Config:
    output_dir: str
    rate: float = option(0.5, "A rate.")
    mode: str | None = option(None, "A mode.", choices=("a", "b"))


@dataclasses.dataclass(kw_only=True)
class _Base:
    name: str = option(help="A required name.")
    count: int | None = option(None, "A count.")
    on: bool = option(False, "A switch.")
    secs: float = option(600, "Whole seconds.", kind="int")
    either: float | str | None = option(None, "A float or a word.")
    kept: int = 3
    config: typing.Any = options.nested(_Config)


@dataclasses.dataclass(kw_only=True)
class _Child(_Base):
    # Redeclared without option(): not a flag of this class.
    on: bool = False
    # The config's flag of the same name gives way to this one.
    rate: float = option(0.1, "The child's rate.", flag="learning_rate")


def test_flags_of_reads_the_fields():
    by_name = {f.name: f for f in options.flags_of(_Base)}
    assert list(by_name) == [
        "name",
        "count",
        "on",
        "secs",
        "either",
        "rate",
        "mode",
    ]
    assert by_name["name"].default is None
    assert [by_name[n].kind for n in ("count", "on", "secs", "either")] == [
        "int",
        "bool",
        "int",
        "string",
    ]
    assert by_name["mode"].kind == "enum"
    assert by_name["mode"].choices == ("a", "b")
    assert "kept" not in by_name and "config" not in by_name


def test_a_subclass_takes_a_flag_out_or_renames_it():
    by_name = {f.name: f for f in options.flags_of(_Child)}
    assert "on" not in by_name
    assert by_name["learning_rate"].field == "rate"
    assert by_name["learning_rate"].default == 0.1
    # The nested config's own `rate` is still a flag of its name.
    assert by_name["rate"].default == 0.5


def test_settings_from_flags_fills_the_run_config(tmp_path):
    # A fresh process: the flags are process-wide.
    code = (
        "import run_embeddings\n"
        "from absl import flags\n"
        "from modeling import flags as shared_flags\n"
        "from modeling.tasks.settings import embeddings\n"
        "flags.FLAGS(['x', '--init_checkpoint=/m', '--do_predict',\n"
        "             '--predict_file=p.txt', '--output_dir=OUT',\n"
        "             '--predict_runtime=tflite', '--optimizer=lamb'])\n"
        "s = shared_flags.settings_from_flags(embeddings.Settings)\n"
        "c = s.run_config\n"
        "print(s.do_lower_case, s.predict_runtime, c.predict_runtime,\n"
        "      c.learning_rate, c.optimizer_type, c.output_dir == s.output_dir,\n"
        "      c.num_train_steps)\n"
    ).replace("OUT", str(tmp_path / "out"))
    out = _run(["-c", code]).split()
    # do_lower_case unset: None (the model folder's casing); run_embeddings'
    # learning rate; --predict_runtime fills the Settings and the RunConfig.
    assert out == ["None", "tflite", "tflite", "2e-05", "lamb", "True", "0"]


def test_flags_given_but_not_read_are_warned_about(tmp_path):
    """The original accepted flags it then ignored (the text options with
    records, TPU names without --use_tpu): accepted here too, not silently."""
    code = (
        "import run_pretraining\n"
        "from absl import flags, logging\n"
        "from modeling import flags as shared_flags\n"
        "from modeling.tasks.settings import pretraining\n"
        "flags.FLAGS(['x', '--input_file=r.tfrecord', '--output_dir=OUT',\n"
        "             '--bert_config_file=c.json', '--do_train',\n"
        "             '--do_whole_word_mask', '--masked_lm_prob=0.3',\n"
        "             '--tpu_name=bar', '--num_train_steps=2'])\n"
        "shared_flags.settings_from_flags(pretraining.Settings)\n"
    ).replace("OUT", str(tmp_path / "out"))
    proc = script_runner.python(["-c", code])
    assert proc.returncode == 0, proc.stderr[-2000:]
    warned = [
        line[line.index("--") :]
        for line in proc.stderr.splitlines()
        if "has no effect here" in line
    ]
    assert [w.split(" ", 1)[0] for w in warned] == [
        "--do_whole_word_mask",
        "--masked_lm_prob",
        "--tpu_name",
    ]
    assert "--input_format=tfrecord" in warned[0]


@dataclasses.dataclass
class _FileSettings:
    input_file: str
    vocab_file: str
    output_file: str
    output_dir: str = ""


def test_an_output_file_that_the_run_reads_is_refused(tmp_path):
    """--output_file naming an input (itself, through a symlink, or matched
    by an input glob) would replace it: refused before anything runs."""
    from modeling import errors
    from modeling import flags as shared_flags

    text = tmp_path / "in.txt"
    text.write_text("a\n")
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("[CLS]\n")
    (tmp_path / "link.txt").symlink_to(text)
    check = shared_flags.check_outputs_are_not_inputs
    for output, flag in (
        (text, "input_file"),
        (tmp_path / "link.txt", "input_file"),
        (vocab, "vocab_file"),
    ):
        with pytest.raises(errors.UserError, match=f"also --{flag}'s file"):
            check(
                _FileSettings(
                    f"x.txt,{tmp_path}/[il]*.txt", str(vocab), str(output)
                )
            )
    # Remote paths, as written, and remote globs.
    for given in ("gs://b/x.txt", "gs://b/*.txt"):
        with pytest.raises(errors.UserError, match="also --input_file's"):
            check(_FileSettings(given, str(vocab), "gs://b/x.txt"))
    # Apart from the inputs: accepted.
    check(_FileSettings(str(text), str(vocab), str(tmp_path / "out.jsonl")))
    check(_FileSettings("gs://b/x.txt", str(vocab), "gs://b/y.jsonl"))
