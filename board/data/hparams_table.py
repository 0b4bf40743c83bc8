"""The HParams table: each run's hyperparameters (the hparams plugin's session records) and final metric values."""
from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass, field

from board.data.store import LogdirStore, UnknownSeries
from instrumentation.format import hparams, metadata
from instrumentation.format.values import PluginValue

HParamValue = float | str | bool | None


@dataclass(frozen=True, slots=True)
class HParamsRow:
    run: str
    hparams: dict[str, HParamValue]
    metrics: dict[str, float]  # metric tag → the last value logged (NaN kept)
    metric_steps: dict[str, int] = field(default_factory=dict)  # metric tag → the step of that value


@dataclass(frozen=True, slots=True)
class HParamsTable:
    hparam_names: tuple[str, ...]
    metric_tags: tuple[str, ...]
    rows: tuple[HParamsRow, ...]
    problems: tuple[str, ...]  # records that could not be read (run and why)


def _value(proto_value) -> HParamValue:
    kind = proto_value.WhichOneof("kind")
    if kind == "number_value":
        return proto_value.number_value
    if kind == "string_value":
        return proto_value.string_value
    if kind == "bool_value":
        return proto_value.bool_value
    return None


def _run_records(store: LogdirStore, run: str, problems: list[str]) -> tuple[dict[str, HParamValue], list[str]] | None:
    """(hparams, metric tags) of a run holding a session start record; None for a run without one."""
    found, metric_tags = None, []
    for tag, values in store.plugin_values(run, metadata.HPARAMS_PLUGIN).items():
        for value in values:
            if value.__class__ is not PluginValue:
                continue
            try:
                data = hparams.HParamsPluginData.FromString(value.content)
            except Exception as error:  # NOTE: any damage in the bytes: reported, the other runs go on
                problems.append(f"{run}: {tag} at step {value.step} is not an hparams record ({type(error).__name__})")
                continue
            which = data.WhichOneof("data")
            if which == "session_start_info":
                found = {name: _value(item) for name, item in data.session_start_info.hparams.items()}
            elif which == "experiment":
                metric_tags += [info.name.tag for info in data.experiment.metric_infos if info.name.tag]
    return None if found is None else (found, metric_tags)


def _last(store: LogdirStore, run: str, tag: str) -> tuple[float, int] | None:
    try:
        columns, _ = store.scalars(run, tag)
    except UnknownSeries:
        return None
    if not len(columns):
        return None
    return float(columns.values[-1]), int(columns.steps[-1])


_TABLES: weakref.WeakKeyDictionary[LogdirStore, tuple[int, HParamsTable]] = weakref.WeakKeyDictionary()
_TABLES_LOCK = threading.Lock()


def hparams_table(store: LogdirStore) -> HParamsTable:
    """The table of the store's runs; built again only when the store's generation moved (any record read)."""
    generation = store.generation  # read first: a table built from newer data is then only rebuilt once more
    with _TABLES_LOCK:
        cached = _TABLES.get(store)
    if cached is not None and cached[0] == generation:
        return cached[1]
    table = _build(store)
    with _TABLES_LOCK:
        _TABLES[store] = (generation, table)
    return table


def _as_booleans(rows: list[HParamsRow], name: str) -> None:
    """One hyperparameter logged as True/False in some runs and 1.0/0.0 in others is one boolean: the numbers
    become booleans (in place), so the table, the axes and the filters see two categories, not four."""
    values = [row.hparams[name] for row in rows if row.hparams.get(name) is not None]
    if any(isinstance(value, bool) for value in values) and all(
            isinstance(value, bool) or (isinstance(value, (int, float)) and value in (0, 1)) for value in values):
        for row in rows:
            if row.hparams.get(name) is not None:
                row.hparams[name] = bool(row.hparams[name])


def _build(store: LogdirStore) -> HParamsTable:
    rows, problems, names, metrics = [], [], {}, {}
    for run in store.run_names():
        records = _run_records(store, run, problems)
        if records is None:
            continue
        values, metric_tags = records
        names.update(dict.fromkeys(values))
        finals, steps = {}, {}
        for tag in metric_tags:
            metrics[tag] = None
            last = _last(store, run, tag)
            if last is not None:
                finals[tag], steps[tag] = last
        rows.append(HParamsRow(run, values, finals, steps))
    for name in names:
        _as_booleans(rows, name)
    return HParamsTable(tuple(sorted(names)), tuple(metrics), tuple(rows), tuple(problems))
