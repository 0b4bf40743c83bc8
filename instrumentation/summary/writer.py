"""SummaryWriter: torch.utils.tensorboard's API; validates and enqueues on the calling thread, writes elsewhere."""
from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from itertools import chain
from typing import Any

import numpy as np

from instrumentation.distributed.context import flush_at_abort
from instrumentation.summary import embedding, graph, hparams, images, pr_curves
from instrumentation.summary.bucketing import Bins, HistogramData, histogram_from_values
from instrumentation.summary.builders import histogram_event, session_start_event, text_event, value_event
from instrumentation.summary.event_file import BUILD, ROWS, SCALAR, AsyncEventWriter
from instrumentation.summary.inputs import check_tag, histogram_values, to_float, to_numpy, to_step
from instrumentation.summary.wire import INT64_MAX, INT64_MIN

DEFAULT_LOG_ROOT = "logs"
logger = logging.getLogger("instrumentation.summary")
_now = time.time


def default_log_dir(comment: str = "") -> str:
    """`logs/<Mon DD_HH-MM-SS>_<host><comment>`, like torch's `runs/...`."""
    return os.path.join(DEFAULT_LOG_ROOT, datetime.now().strftime("%b%d_%H-%M-%S") + "_" + socket.gethostname()
                        + comment)


_FLOAT_ONLY, _INT_ONLY = {float}, {int}
_CHECKED_TAGS_MAX = 1024


def _image_record(tag: str, hwc: np.ndarray, step: int, wall_time: float) -> bytes:
    return value_event(images.image_value(tag, hwc), step, wall_time)


def _pr_curve_record(tag: str, inputs: tuple, step: int, wall_time: float) -> bytes:
    return value_event(pr_curves.pr_curve_value(tag, *inputs), step, wall_time)


def _histogram_record(tag: str, values: np.ndarray, bins: Bins, max_bins: int | None, step: int,
                      wall_time: float) -> bytes:
    return histogram_event(tag, histogram_from_values(values, bins, max_bins, may_reorder=True), step, wall_time)


class SummaryWriter:
    """Writes TensorBoard event files under `log_dir`, with torch.utils.tensorboard.SummaryWriter's methods.

    Each `add_*` checks its arguments (ValueError naming the tag) and enqueues; serializing, bucketing and
    writing run on a background thread (see AsyncEventWriter). Scalars: `add_scalar` (one value), `add_scalars`
    (torch's sub-runs) and `add_scalar_rows` (many values and steps in one call), all written as `simple_value`
    Events; NaN/Inf as they are. In a
    data-parallel job (`engine.distributed` initialised) `flush()` is registered with `engine.distributed.at_abort`:
    a rank's failure aborts the job only after every rank's writers flushed (`instrumentation.rank_logdir` gives each
    rank its own run).
    """

    def __init__(self, log_dir: str | os.PathLike[str] | None = None, comment: str = "",
                 purge_step: int | None = None, max_queue: int = 1024, flush_secs: float = 2.0,
                 filename_suffix: str = "") -> None:
        self.log_dir = os.fspath(log_dir) if log_dir else default_log_dir(comment)
        self.purge_step = purge_step
        self._async = AsyncEventWriter(self.log_dir, max_queue=max_queue, flush_secs=flush_secs,
                                       filename_suffix=filename_suffix)
        self._put = self._async.put
        self._queue, self._max_queue = self._async.queue, self._async.max_queue
        self._queue_append = self._queue.append
        self._checked_tags: set[tuple[str, ...]] = set()  # the tuples add_scalar_rows checked
        self._last_tags: tuple[str, ...] | None = None  # ... the last one it was passed
        self._embeddings: list[embedding.EmbeddingEntry] = []  # what projector_config.pbtxt lists
        self._flush_callbacks: list[Callable[[], None]] = []
        self._failed_callbacks: list[Callable[[], None]] = []
        if purge_step is not None:
            self._put((BUILD, None, session_start_event, (time.time(), to_step(purge_step))))
        self._async.open_run()
        flush_at_abort(self.flush)  # data-parallel: a rank failure aborts every rank, after this flush

    def get_logdir(self) -> str:
        return self.log_dir

    @property
    def dropped_events(self) -> int:
        """Events lost to I/O errors such as a full disk (a run's failing writes are logged once, and again when they
        succeed; see AsyncEventWriter)."""
        return self._async.dropped_events

    def add_scalar(self, tag: str, scalar_value: Any, global_step: int | None = None,
                   walltime: float | None = None) -> None:
        """One point of the series `tag`, as torch's `add_scalar`: `scalar_value` a number (Python, NumPy, or a
        one-element array or tensor), stored as float32; `global_step` an int within int64 (None: 0); `walltime` in
        seconds since the epoch (None: now)."""
        if tag.__class__ is not str:
            check_tag(tag)
        value = scalar_value if scalar_value.__class__ is float else to_float(tag, scalar_value)
        step = global_step if global_step.__class__ is int and INT64_MIN <= global_step <= INT64_MAX else \
            to_step(global_step)
        # NOTE: AsyncEventWriter.put inlined: this is the call a training loop makes most often.
        self._queue_append((SCALAR, None, tag, value, step, _now() if walltime is None else walltime))
        if len(self._queue) >= self._max_queue:
            self._async.on_full()

    def add_scalar_rows(self, tags: tuple[str, ...], rows: Sequence[Sequence[Any]] | np.ndarray,
                        global_steps: Sequence[int], walltimes: Sequence[float] | None = None) -> None:
        """Many points in one call: row `i` of `rows` holds a value per tag, at `global_steps[i]` and `walltimes[i]`
        (None: now) — the points `add_scalar(tag, value, step, walltime)` gives for each value, written as one Event
        per row (TensorFlow 1's merged-summary form: TensorBoard and our reader see the same points). One queue item
        whatever its size, framed on the writer thread (24 rows or more in a few NumPy calls): for a loop logging
        several values per step (one row), or handing a value logged every step over in batches (`tags` of one tag).

        `tags` is a tuple of str (a tuple seen before is not checked again); `rows` a sequence of rows or a 2-D
        array of shape (steps, tags). Rows, steps and wall times are aligned, and copied."""
        if tags is not self._last_tags:
            self._check_tags(tags)
        width = len(tags)
        steps = [*global_steps]
        if {*map(type, steps)} - _INT_ONLY:  # NOTE: one check for all, as for the values below
            steps = [step if step.__class__ is int else to_step(step) for step in steps]
        if steps and (min(steps) < INT64_MIN or max(steps) > INT64_MAX):
            raise ValueError(f"add_scalar_rows: global_steps {min(steps)}..{max(steps)} do not fit an int64")
        walls = [_now()] * len(steps) if walltimes is None else [*walltimes]
        if {*map(type, walls)} - _FLOAT_ONLY:
            walls = [float(wall) for wall in walls]
        if rows.__class__ is np.ndarray and rows.dtype.kind in "biuf":
            if rows.ndim != 2 or rows.shape[1] != width:
                raise ValueError(f"add_scalar_rows: rows of shape {rows.shape} for {width} tags")
            copies: Any = rows.astype(np.float64)
        else:
            copies = [[*row] for row in rows]
            if {*map(len, copies)} - {width}:
                wrong = next(len(values) for values in copies if len(values) != width)
                raise ValueError(f"add_scalar_rows: a row of {wrong} values for {width} tags")
            if {*map(type, chain.from_iterable(copies))} - _FLOAT_ONLY:  # NOTE: one check for every row
                copies = [[value if value.__class__ is float else to_float(tag, value)
                           for tag, value in zip(tags, values)] for values in copies]
        if not len(copies) == len(steps) == len(walls):
            raise ValueError(f"add_scalar_rows: {len(copies)} rows, {len(steps)} steps and {len(walls)} wall times")
        if width and steps:
            self._queue_append((ROWS, None, tags, copies, steps, walls))
            if len(self._queue) >= self._max_queue:
                self._async.on_full()

    def _check_tags(self, tags: tuple[str, ...]) -> None:
        if tags.__class__ is not tuple:
            raise ValueError(f"add_scalar_rows: tags must be a tuple of str, got {type(tags).__name__}")
        if tags not in self._checked_tags:
            for tag in tags:
                check_tag(tag)
            if len(self._checked_tags) >= _CHECKED_TAGS_MAX:
                self._checked_tags.clear()
            self._checked_tags.add(tags)
        self._last_tags = tags

    def add_scalars(self, main_tag: str, tag_scalar_dict: Mapping[str, Any], global_step: int | None = None,
                    walltime: float | None = None) -> None:
        """torch's `add_scalars`: one sub-run per key, `<log_dir>/<main_tag with / as _>_<key>`, each holding the
        series `main_tag` (TensorBoard then draws the keys as lines of one chart). For many values of one run,
        `add_scalar_rows`."""
        check_tag(main_tag)
        step = to_step(global_step)
        wall_time = time.time() if walltime is None else walltime
        values = [(check_tag(key), to_float(f"{main_tag}/{key}", value)) for key, value in tag_scalar_dict.items()]
        for key, value in values:
            run_dir = os.path.join(self.log_dir, main_tag.replace("/", "_") + "_" + key)
            self._put((SCALAR, run_dir, main_tag, value, step, wall_time))

    def add_histogram(self, tag: str, values: Any, global_step: int | None = None, bins: Bins = "tensorflow",
                      walltime: float | None = None, max_bins: int | None = None) -> None:
        """Buckets are computed on the writer thread from a copy; `bins` is "tensorflow", an int or a numpy rule."""
        check_tag(tag)
        if not (isinstance(bins, str) or (isinstance(bins, (int, np.integer)) and not isinstance(bins, bool)
                                          and bins > 0)):
            raise ValueError(f"add_histogram({tag!r}): bins must be 'tensorflow', a numpy rule or a positive int")
        if max_bins is not None and (not isinstance(max_bins, int) or max_bins < 1):
            raise ValueError(f"add_histogram({tag!r}): max_bins must be a positive int, got {max_bins!r}")
        array = histogram_values(tag, values)
        self._put_built(None, _histogram_record, tag, array, bins, max_bins, to_step(global_step),
                      time.time() if walltime is None else walltime)

    def add_histogram_raw(self, tag: str, min: float, max: float, num: float, sum: float, sum_squares: float,
                          bucket_limits: Any, bucket_counts: Any, global_step: int | None = None,
                          walltime: float | None = None) -> None:
        """A histogram given as TF's fields: `bucket_limits` are the buckets' right edges."""
        check_tag(tag)
        limits = to_numpy(bucket_limits).astype(np.float64).reshape(-1)
        counts = to_numpy(bucket_counts).astype(np.float64).reshape(-1)
        if limits.size == 0 or limits.size != counts.size:
            raise ValueError(f"add_histogram_raw({tag!r}): need as many bucket_limits as bucket_counts (and >= 1), "
                             f"got {limits.size} and {counts.size}")
        moments = [to_float(tag, number) for number in (min, max, num, sum, sum_squares)]
        histogram = HistogramData(*moments, edges=np.concatenate([[moments[0]], limits]), counts=counts)
        self._put_built(None, histogram_event, tag, histogram, to_step(global_step),
                      time.time() if walltime is None else walltime)

    def add_text(self, tag: str, text_string: str, global_step: int | None = None,
                 walltime: float | None = None) -> None:
        check_tag(tag)
        if not isinstance(text_string, str):
            raise ValueError(f"add_text({tag!r}): text must be a str, got {type(text_string).__name__}")
        self._put_built(None, text_event, tag, text_string, to_step(global_step),
                      time.time() if walltime is None else walltime)

    def add_image(self, tag: str, img_tensor: Any, global_step: int | None = None, walltime: float | None = None,
                  dataformats: str = "CHW") -> None:
        """One image (CHW, HWC, HW, ...; uint8 as is, floats taken as [0, 1]), PNG-encoded on the writer thread."""
        check_tag(tag)
        hwc = images.to_hwc(tag, img_tensor, dataformats, batch=False)
        self._put_built(None, _image_record, tag, hwc, to_step(global_step),
                        time.time() if walltime is None else walltime)

    def add_images(self, tag: str, img_tensor: Any, global_step: int | None = None, walltime: float | None = None,
                   dataformats: str = "NCHW") -> None:
        """A batch of images (NCHW or NHWC, 1 or 3 channels) as one image, 8 to a row (torch's grid)."""
        check_tag(tag)
        hwc = images.to_hwc(tag, img_tensor, dataformats, batch=True)
        self._put_built(None, _image_record, tag, hwc, to_step(global_step),
                        time.time() if walltime is None else walltime)

    def add_figure(self, tag: str, figure: Any, global_step: int | None = None, close: bool = True,
                   walltime: float | None = None) -> None:
        """A matplotlib figure (or a list of them, as a grid) as an image; needs matplotlib."""
        if isinstance(figure, list):
            self.add_images(tag, np.stack([images.figure_to_chw(item, close) for item in figure]), global_step,
                            walltime, dataformats="NCHW")
        else:
            self.add_image(tag, images.figure_to_chw(figure, close), global_step, walltime, dataformats="CHW")

    def add_pr_curve(self, tag: str, labels: Any, predictions: Any, global_step: int | None = None,
                     num_thresholds: int = 127, weights: Any = None, walltime: float | None = None) -> None:
        """A precision-recall curve (pr_curves plugin): labels 0/1, predictions in [0, 1], at most 127 thresholds."""
        check_tag(tag)
        inputs = pr_curves.checked_inputs(tag, labels, predictions, num_thresholds, weights)
        self._put_built(None, _pr_curve_record, tag, inputs, to_step(global_step),
                      time.time() if walltime is None else walltime)

    def add_graph(self, model: Any, input_to_model: Any = None, verbose: bool = False,
                  use_strict_trace: bool = True) -> None:
        """The graph of one forward pass of an engine model (no gradients), as TensorBoard's GraphDef: `input_to_model`
        is a Tensor or a tuple of them. `verbose` and `use_strict_trace` are accepted for torch's signature."""
        if input_to_model is None:
            raise ValueError("add_graph: input_to_model is needed to run the model once")
        inputs = tuple(input_to_model) if isinstance(input_to_model, (tuple, list)) else (input_to_model,)
        graph_def = graph.trace_graph(model, inputs).SerializeToString()
        self._put_built(None, graph.graph_event, graph_def, time.time())

    def add_embedding(self, mat: Any, metadata: Sequence[Any] | None = None, label_img: Any = None,
                      global_step: int | None = None, tag: str = "default",
                      metadata_header: Sequence[Any] | None = None) -> None:
        """Points for TensorBoard's projector: files under `<log_dir>/<step:05d>/<tag>/` and the run's
        `projector_config.pbtxt`, written on the calling thread (torch's layout)."""
        check_tag(tag)
        entry = embedding.write_embedding(self.log_dir, mat, metadata, label_img, to_step(global_step), tag,
                                          metadata_header)
        self._embeddings.append(entry)
        embedding.write_config(self.log_dir, self._embeddings)

    def add_hparams(self, hparam_dict: Mapping[str, Any], metric_dict: Mapping[str, Any],
                    hparam_domain_discrete: Mapping[str, Sequence[Any]] | None = None, run_name: str | None = None,
                    global_step: int | None = None) -> None:
        """Like torch: the experiment, session start/end and the metrics go to the sub-run `<log_dir>/<run_name>`
        (default: the current Unix time), which TensorBoard's HParams dashboard lists as one session."""
        hparams.validate(hparam_dict, metric_dict, hparam_domain_discrete)
        metrics = {tag: to_float(tag, value) for tag, value in metric_dict.items()}
        run_dir = os.path.join(self.log_dir, run_name or str(time.time()))
        step, wall_time = to_step(global_step), time.time()
        hparam_copy, domain_copy = dict(hparam_dict), {k: list(v) for k, v in (hparam_domain_discrete or {}).items()}
        self._put_built(run_dir, hparams.experiment_event, hparam_copy, list(metrics), domain_copy, step, wall_time)
        self._put_built(run_dir, hparams.session_start_event, hparam_copy, step, wall_time)
        self._put_built(run_dir, hparams.session_end_event, step, wall_time)
        for tag, value in metrics.items():
            self._put((SCALAR, run_dir, tag, value, step, wall_time))

    def _put_built(self, run_dir: str | None, build: Callable[..., Any], *args: Any) -> None:
        """Queues ``build(*args)``, run on the writer thread (it returns a serialized Event or a list of them)."""
        self._put((BUILD, run_dir, build, args))

    def add_flush_callback(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` at the start of each ``flush()`` and ``close()`` (on the calling thread): a source that
        hands its scalars over in batches (the memory tracker) hands over what it holds, so a flush has everything
        logged so far. An exception in it is logged once and the flush goes on."""
        self._flush_callbacks.append(callback)

    def remove_flush_callback(self, callback: Callable[[], None]) -> None:
        self._flush_callbacks[:] = [c for c in self._flush_callbacks if c != callback]  # NOTE: == (bound methods)

    def flush(self) -> None:
        """Blocks until every event added so far is in the file (readable even if the process is killed)."""
        self._run_flush_callbacks()
        self._async.flush()

    def _run_flush_callbacks(self) -> None:
        for callback in list(self._flush_callbacks):
            try:
                callback()
            except Exception as error:  # noqa: BLE001 - a flush must not fail because of a source
                if callback not in self._failed_callbacks:
                    self._failed_callbacks.append(callback)
                    logger.warning("SummaryWriter(%s): flush callback %r failed: %r", self.log_dir, callback, error)

    def close(self) -> None:
        """Flushes and closes the files; logs how many events were dropped, if any."""
        self._run_flush_callbacks()
        self._async.close()

    def __enter__(self) -> SummaryWriter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
