"""The Beam runner (`--runner=beam`): the scale mode's shards as an Apache
Beam pipeline, for corpora past one machine.

The pipeline is the scale mode cut at its shard boundaries:
1. Plan: each input file is cut into shards by `shards.plan_shards`, one
   file per task, and the shards are numbered in file order (a file's first
   index is the number of shards of the files before it), which is the
   numbering the scale mode gives them in one pass.
2. Make: each shard becomes records through `scale.make_records`, the scale
   mode's own per-shard code, with the shard's own random stream
   (`scale.shard_rng(random_seed, index)`). Nothing depends on which worker
   runs which shard, so the records are the same on any runner with any
   parallelism, and the same as the scale mode's for the same seed and
   shard size.
3. Write: shard i's records go to `<output_file>-{i:05d}-of-{N:05d}`
   (records.ShardRecordFiles), in the order the scale mode writes them.
   The scale mode writes this same layout with --per_shard_output, so the
   two runners' outputs compare file by file; and its default output (one
   file) is these files concatenated in shard order. Round-robin across
   several --output_file files, as the scale mode does by default, would
   need every record to pass through one writer in order, which is what a
   cluster run must avoid: the Beam runner takes one --output_file, a
   prefix.

Publication is atomic as in the other modes: workers write into a hidden
folder beside the outputs, and only after the pipeline has succeeded does
this process check the totals and rename the files into place; any failure
removes the folder. A shard with bad input (bytes that are not UTF-8 under
--decode_errors=strict) fails its task; its message is first left in the
folder, because runners hand a worker's exception back wrapped in their own
(a RuntimeError carrying the remote traceback), and this process raises it
as the same one-line ValueError the other modes raise. An input without
any document is found from the pipeline's totals, with the other modes'
error.

Progress comes from Beam counters (namespace `bert_pretraining_data`:
shards, documents, instances, text_bytes, record_bytes; every instance is
one record), logged with the rate when the run ends and every
`_PROGRESS_SECS` while a remote runner (Dataflow, Flink, Spark) works.
Beam's local runner returns only when done, so meanwhile each worker logs
one line per shard.

SIGTERM ends the local worker processes at once, before the hidden folder
is removed (beam_local.py).

`--runner=DirectRunner` (the default) runs on Beam's local FnApiRunner, the
engine the DirectRunner itself falls back to: Beam 2.77's DirectRunner first
tries to download its Prism runner, which would make this script reach the
network and ignore --direct_num_workers. Name `PrismRunner` to get Prism.

Apache Beam is an optional extra (`pip install .[beam]`), imported only
when this runner runs: importing this module loads neither Beam nor
TensorFlow (tests/layering_test.py). As in the other modes, only remote
paths (gs://...) make a process load TensorFlow, for tf.io.
"""

import dataclasses
import json
import logging as py_logging
import shlex
import threading
import time

from absl import logging

from modeling import errors
from modeling.data import file_io
from modeling.pretraining_data import beam_local
from modeling.pretraining_data import exact
from modeling.pretraining_data import generation
from modeling.pretraining_data import records
from modeling.pretraining_data import scale
from modeling.pretraining_data import shards as shards_lib
from modeling.pretraining_data import text

DEFAULT_PIPELINE_OPTIONS = (
    "--runner=DirectRunner --direct_num_workers=0 "
    "--direct_running_mode=multi_processing"
)
NAMESPACE = "bert_pretraining_data"
COUNTERS = ("shards", "documents", "instances", "text_bytes", "record_bytes")
# Seconds between progress lines while a remote runner works.
_PROGRESS_SECS = 30.0
# Records logged at the end, as the original logs its first instances.
_NUM_LOGGED = 20
# Runner names that mean Beam's local runner (compared lower-case).
_DIRECT_NAMES = ("direct", "directrunner", "switchingdirectrunner")
# Runners whose workers share this machine's files.
_LOCAL_RUNNERS = (*_DIRECT_NAMES, "fnapirunner", "prism", "prismrunner")


def import_beam():
    """The apache_beam module.

    Raises:
      errors.UserError: Apache Beam is not installed.
    """
    try:
        import apache_beam
    except ImportError as e:
        raise errors.UserError(
            f"--runner=beam needs Apache Beam, an optional extra ({e}): "
            "pip install .[beam] (in the repository) or pip install "
            "apache-beam"
        ) from None
    return apache_beam


def pipeline_options(flag_value):
    """Beam PipelineOptions from --beam_pipeline_options (a command line).

    No runner, or the DirectRunner, means the local FnApiRunner (see the
    module docstring).
    """
    from apache_beam.options.pipeline_options import PipelineOptions
    from apache_beam.options.pipeline_options import StandardOptions

    options = PipelineOptions(shlex.split(flag_value))
    standard = options.view_as(StandardOptions)
    if (standard.runner or "DirectRunner").lower() in _DIRECT_NAMES:
        standard.runner = "FnApiRunner"
    return options


def _check_paths_reach_the_workers(beam_options, input_files, output_files):
    """A runner of other machines (Dataflow, Flink, Spark) cannot read or
    write this machine's files: said before the job starts, not as a
    worker's FileNotFoundError after it has."""
    from apache_beam.options.pipeline_options import PortableOptions
    from apache_beam.options.pipeline_options import StandardOptions

    runner = str(beam_options.view_as(StandardOptions).runner or "")
    environment = beam_options.view_as(PortableOptions).environment_type
    # LOOPBACK: the runner calls back into this process for the work.
    if runner.lower() in _LOCAL_RUNNERS or environment == "LOOPBACK":
        return
    for flag, paths in (
        ("--input_file", input_files),
        ("--output_file", output_files),
    ):
        local = [p for p in paths if not file_io.is_remote(p)]
        if local:
            raise errors.UserError(
                f"{flag}={local[0]} is on this machine, which the {runner}'s "
                "workers cannot reach: give a path on storage they read "
                "(gs://...)"
            )


@dataclasses.dataclass(frozen=True)
class _Job:
    """What each worker needs; Beam ships it with the pipeline."""

    tokenizer: object  # tokenization.FullTokenizer
    options: generation.GenerationOptions
    decode_errors: str
    prefix: str
    work_dir: str

    def files(self):
        return records.ShardRecordFiles(self.prefix, self.work_dir)


# The scale mode's worker state, made once per worker process (the
# tokenizer's word cache then serves every shard the process runs).
_STATE_LOCK = threading.Lock()
_STATE = {}


def _state(job):
    with _STATE_LOCK:
        state = _STATE.get(job.work_dir)
        if state is None:
            _STATE.clear()
            state = scale.worker_state(
                job.tokenizer, job.options, job.decode_errors
            )
            _STATE[job.work_dir] = state
    return state


def _error_path(work_dir, index):
    return f"{work_dir}/error-{index:05d}.txt"


def _summary_path(work_dir):
    return f"{work_dir}/summary.json"


def _read_text(path):
    with shards_lib.open_binary(path) as f:
        return f.read().decode("utf-8")


# === The pipeline's steps (module functions: Beam ships them by name) ===


def _plan_file(item, shard_bytes):
    """(file number, path) -> (file number, its Shards numbered from 0)."""
    number, path = item
    return number, list(shards_lib.plan_shards([path], shard_bytes))


def _shard_count(planned):
    number, shards = planned
    return number, len(shards)


def _first_indices(counts):
    """[(file number, shard count)] -> {file number: its first index}."""
    first, total = {}, 0
    for number, count in sorted(counts):
        first[number] = total
        total += count
    return first


def _number_shards(planned, first_indices):
    number, shards = planned
    offset = first_indices[number]
    for shard in shards:
        yield dataclasses.replace(shard, index=offset + shard.index)


def _make_shard(shard, job):
    """Writes one shard's records; returns its counts (and adds them to the
    Beam counters)."""
    from apache_beam.metrics import Metrics

    start = time.monotonic()
    try:
        made, stats = scale.make_records(shard, _state(job))
        count, nbytes = job.files().write(shard.index, made or ())
    except ValueError as e:
        # For the launcher: runners pass the exception on wrapped.
        file_io.write_text(_error_path(job.work_dir, shard.index), str(e))
        raise
    counts = dataclasses.asdict(stats)
    counts.update(shards=1, instances=count, record_bytes=nbytes)
    counts["text_bytes"] = counts.pop("bytes")
    for name in COUNTERS:
        Metrics.counter(NAMESPACE, name).inc(counts[name])
    logging.info(
        "Shard %d: %.2f MB of text, %d documents, %d instances, %.1f s",
        shard.index,
        counts["text_bytes"] / 1e6,
        counts["documents"],
        count,
        time.monotonic() - start,
    )
    return counts


def _sum_counts(values):
    total = {}
    for counts in values:
        for name, value in counts.items():
            total[name] = total.get(name, 0) + value
    return total


def _write_summary(total, work_dir):
    file_io.write_text(_summary_path(work_dir), json.dumps(total))


def _build(beam, options, input_files, shard_bytes, job):
    pipeline = beam.Pipeline(options=options)
    planned = (
        pipeline
        | "Input files" >> beam.Create(list(enumerate(input_files)))
        | "Plan shards" >> beam.Map(_plan_file, shard_bytes)
    )
    first_indices = (
        planned
        | "Count shards" >> beam.Map(_shard_count)
        | "All counts" >> beam.combiners.ToList()
        | "First indices" >> beam.Map(_first_indices)
    )
    _ = (
        planned
        | "Number shards"
        >> beam.FlatMap(_number_shards, beam.pvalue.AsSingleton(first_indices))
        # Breaks fusion with the planning, so shards spread over workers.
        | "Spread shards" >> beam.Reshuffle()
        | "Make records" >> beam.Map(_make_shard, job)
        | "Sum counts" >> beam.CombineGlobally(_sum_counts)
        | "Write summary" >> beam.Map(_write_summary, job.work_dir)
    )
    return pipeline


# === The launcher ===


def _counters(result, final):
    """The run's counters: committed at the end (attempted where a runner
    does not commit), attempted while it runs."""
    from apache_beam.metrics.metric import MetricsFilter

    query = result.metrics().query(MetricsFilter().with_namespace(NAMESPACE))
    values = dict.fromkeys(COUNTERS, 0)
    for counter in query["counters"]:
        value = None
        if final:
            try:
                value = counter.committed
            except Exception:  # noqa: BLE001 (runners without commits)
                value = None
        if value is None:
            value = counter.attempted
        if counter.key.metric.name in values:
            values[counter.key.metric.name] += value or 0
    return values


def _log_counters(values, total_bytes, start):
    elapsed = max(time.monotonic() - start, 1e-9)
    logging.info(
        "Beam: %d shards, %d documents, %d instances, %.1f/%.1f MB of text "
        "(%.0f%%), %.1f MB of records, %.1f s, %.2f MB/s of text",
        values["shards"],
        values["documents"],
        values["instances"],
        values["text_bytes"] / 1e6,
        total_bytes / 1e6,
        100.0 * values["text_bytes"] / max(total_bytes, 1),
        values["record_bytes"] / 1e6,
        elapsed,
        values["text_bytes"] / 1e6 / elapsed,
    )


def _first_error(work_dir):
    """The message of the lowest-numbered shard that failed, or None."""
    failed = file_io.files_named(f"{work_dir}/error-", r"\d{5}\.txt")
    return _read_text(failed[0]) if failed else None


def _cancel(result):
    """Cancels a pipeline that is still running: a remote runner's job
    (Dataflow, Flink, Spark) would otherwise go on, billed, writing into a
    folder its launcher removes, after a SIGTERM, Ctrl-C or an error stops
    the launcher. (The local runner's workers are stopped by
    beam_local.stopped_by_sigterm.)"""
    from apache_beam.runners.runner import PipelineState

    try:
        if PipelineState.is_terminal(result.state):
            return
        logging.warning("Cancelling the Beam pipeline")
        result.cancel()
    except Exception as e:  # noqa: BLE001 (a runner that cannot cancel)
        logging.warning("Could not cancel the Beam pipeline: %s", e)


def _run(pipeline, work_dir, total_bytes):
    """Runs the pipeline to its end, logging progress.

    Raises:
      ValueError: a shard's bad input (the message the other modes give).
      RuntimeError: the pipeline did not finish.
    """
    from apache_beam.runners.runner import PipelineState

    start = time.monotonic()
    # Beam's own INFO lines (a dozen per local worker, each worker line
    # repeated by the local job service) would bury the progress lines.
    beam_logger = py_logging.getLogger("apache_beam")
    level = beam_logger.level
    if not logging.level_debug():
        beam_logger.setLevel(py_logging.WARNING)
    try:
        with beam_local.stopped_by_sigterm():
            result = pipeline.run()
            try:
                while not PipelineState.is_terminal(result.state):
                    result.wait_until_finish(
                        duration=int(_PROGRESS_SECS * 1000)
                    )
                    _log_counters(_counters(result, False), total_bytes, start)
                state = result.wait_until_finish() or result.state
            except BaseException:
                _cancel(result)
                raise
    except errors.Interrupted:
        raise
    except Exception:
        message = _first_error(work_dir)
        if message is not None:
            raise ValueError(message) from None
        raise
    finally:
        beam_logger.setLevel(level)
    if state != PipelineState.DONE:
        message = _first_error(work_dir)
        if message is not None:
            raise ValueError(message)
        raise RuntimeError(f"The Beam pipeline ended in state {state}")
    values = _counters(result, True)
    _log_counters(values, total_bytes, start)
    return values


def create_with_beam(
    input_files,
    output_files,
    tokenizer,
    options,
    shard_bytes=1_000_000,
    decode_errors="strict",
    beam_pipeline_options=DEFAULT_PIPELINE_OPTIONS,
):
    """The Beam runner: the scale mode's records, one file per shard.

    Args:
      input_files: list of str.
      output_files: list of one str, the prefix of the output files.
      tokenizer: tokenization.FullTokenizer.
      options: pretraining_data.GenerationOptions.
      shard_bytes: int, nominal shard size in bytes.
      decode_errors: "strict", "replace" or "ignore".
      beam_pipeline_options: str, Beam's command-line options.

    Returns:
      dict of counts: instances, shards, record_bytes, and the ReadStats
      fields (text_bytes for `bytes`).

    Raises:
      errors.UserError: Apache Beam is not installed.
      ValueError: bad options, vocabulary, text or output files; no output
        file is left behind.
    """
    beam = import_beam()
    options.validate()
    scale.check_shard_args(shard_bytes, decode_errors)
    shards_lib.check_output_files(output_files, input_files)
    scale.check_per_shard_output(output_files)
    # The vocabulary's errors come here, not from every worker.
    scale.worker_state(tokenizer, options, decode_errors)
    beam_options = pipeline_options(beam_pipeline_options)
    _check_paths_reach_the_workers(beam_options, input_files, output_files)
    total_bytes = sum(shards_lib.file_size(f) for f in input_files)
    with records.ShardRecordFiles(output_files[0]) as out:
        job = _Job(tokenizer, options, decode_errors, out.prefix, out.work_dir)
        pipeline = _build(beam, beam_options, input_files, shard_bytes, job)
        logging.info(
            "Running the Beam pipeline: %s", beam_pipeline_options or "-"
        )
        _run(pipeline, out.work_dir, total_bytes)
        counts = json.loads(_read_text(_summary_path(out.work_dir)))
        stats = text.ReadStats(
            **{
                field.name: counts.get(
                    "text_bytes" if field.name == "bytes" else field.name, 0
                )
                for field in dataclasses.fields(text.ReadStats)
            }
        )
        exact.log_read_stats(stats, input_files)
        if not stats.documents:
            exact.check_documents([], input_files)
        num_shards = counts.get("shards", 0)
        out.publish(num_shards)
    for record in out.first_records(num_shards, _NUM_LOGGED):
        records.log_instance(record, tokenizer.inv_vocab)
    logging.info(
        "Wrote %d total instances to %s-*-of-%05d",
        counts["instances"],
        out.prefix,
        num_shards,
    )
    return counts
