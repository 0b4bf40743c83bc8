"""Builders of the three HParams-plugin records (experiment, session start, session end) that torch writes."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from instrumentation.format import hparams, metadata
from instrumentation.summary.builders import plugin_event
from instrumentation.summary.inputs import to_float


def _set_value(proto_value: Any, value: Any) -> int:
    """Fills a google.protobuf.Value; returns the HParams DataType."""
    if isinstance(value, bool):
        proto_value.bool_value = value
        return hparams.DATA_TYPE_BOOL
    if isinstance(value, str):
        proto_value.string_value = value
        return hparams.DATA_TYPE_STRING
    proto_value.number_value = to_float(f"hparam {value!r}", value)
    return hparams.DATA_TYPE_FLOAT64


def validate(hparam_dict: Any, metric_dict: Any, domain_discrete: Any) -> None:
    """Raises ValueError on the calling thread for anything the records could not carry."""
    if not isinstance(hparam_dict, Mapping) or not isinstance(metric_dict, Mapping):
        raise ValueError("add_hparams: hparam_dict and metric_dict must be dicts")
    for name, value in hparam_dict.items():
        if not isinstance(name, str):
            raise ValueError(f"add_hparams: hparam name must be a str, got {name!r}")
        if value is not None and not isinstance(value, (bool, str)):
            _set_value(hparams.ListValue().values.add(), value)  # raises ValueError naming the value
    for name, values in (domain_discrete or {}).items():
        if name not in hparam_dict or not isinstance(values, (list, tuple)):
            raise ValueError(f"add_hparams: hparam_domain_discrete[{name!r}] must list values of a known hparam")
    for tag in metric_dict:
        if not isinstance(tag, str):
            raise ValueError(f"add_hparams: metric tag must be a str, got {tag!r}")


def _plugin_data_event(tag: str, plugin_data: Any, wall_time: float, step: int) -> bytes:
    plugin_data.version = metadata.HPARAMS_DATA_VERSION
    return plugin_event(tag, metadata.HPARAMS_PLUGIN, plugin_data.SerializeToString(), step, wall_time)


def experiment_event(hparam_dict: Mapping[str, Any], metric_tags: list[str],
                     domain_discrete: Mapping[str, list[Any]] | None, step: int, wall_time: float) -> bytes:
    experiment = hparams.Experiment()
    for name, value in hparam_dict.items():
        if value is None:
            continue
        info = experiment.hparam_infos.add(name=name)
        info.type = _set_value(hparams.ListValue().values.add(), value)
        for discrete in (domain_discrete or {}).get(name, ()):
            _set_value(info.domain_discrete.values.add(), discrete)
    for tag in metric_tags:
        experiment.metric_infos.add().name.tag = tag
    return _plugin_data_event(metadata.HPARAMS_EXPERIMENT_TAG, hparams.HParamsPluginData(experiment=experiment),
                              wall_time, step)


def session_start_event(hparam_dict: Mapping[str, Any], step: int, wall_time: float) -> bytes:
    start = hparams.SessionStartInfo(start_time_secs=wall_time)
    for name, value in hparam_dict.items():
        if value is not None:
            _set_value(start.hparams[name], value)
    return _plugin_data_event(metadata.HPARAMS_SESSION_START_TAG, hparams.HParamsPluginData(session_start_info=start),
                              wall_time, step)


def session_end_event(step: int, wall_time: float) -> bytes:
    end = hparams.SessionEndInfo(status=hparams.STATUS_SUCCESS, end_time_secs=wall_time)
    return _plugin_data_event(metadata.HPARAMS_SESSION_END_TAG, hparams.HParamsPluginData(session_end_info=end),
                              wall_time, step)
