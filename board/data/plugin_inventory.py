"""Every plugin's data per run, shown by this board or not: in the event files and in files kept beside them."""
from __future__ import annotations

import os
import re
from dataclasses import dataclass

from board.data.store import LogdirStore, UnknownSeries
from instrumentation.format import metadata
from instrumentation.format.confined import open_regular

# Plugins whose event-file data a page of this board draws.
SHOWN_EVENT_PLUGINS = frozenset({metadata.SCALARS_PLUGIN, metadata.HISTOGRAMS_PLUGIN, metadata.TEXT_PLUGIN,
                                 metadata.IMAGES_PLUGIN, metadata.PR_CURVES_PLUGIN, metadata.HPARAMS_PLUGIN})


def _graph_page_tag(tag: str) -> bool:
    """The Graph page draws GraphDefs and names the run metadata beside them; TF's meta graphs are not shown."""
    return tag == metadata.GRAPH_TAG or tag.startswith(metadata.RUN_METADATA_TAG_PREFIX)


# Plugins of which a page draws only some tags.
SHOWN_EVENT_TAGS = {metadata.GRAPHS_PLUGIN: _graph_page_tag}
# `<run>/plugins/<name>/` folders that a page of this board reads (LOGFORMAT.md; "system": the System page's NVML note
# from `instrumentation.format.system_status`).
SHOWN_FILE_PLUGINS = frozenset({"profile", "memory", "alerts", "graph", "system"})

MAX_PROJECTOR_CONFIG_BYTES = 1 << 20
_TENSOR_NAME = re.compile(rb'^\s*tensor_name:\s*"((?:[^"\\]|\\.)*)"', re.MULTILINE)


@dataclass(frozen=True, slots=True)
class PluginUse:
    run: str
    plugin: str
    source: str  # "events" (summary values in the event files) or "files" (kept beside them)
    tags: int  # tags (events) or entries (files: embeddings, capture folders)
    values: int  # values (events) or files
    shown: bool  # a page of this board draws it


def _projector(run: str, path: str) -> PluginUse | None:
    config = os.path.join(path, metadata.PROJECTOR_CONFIG_FILE)
    try:
        with open_regular(config, path) as file:
            text = file.read(MAX_PROJECTOR_CONFIG_BYTES)
    except FileNotFoundError:
        return None
    except OSError:
        return PluginUse(run, metadata.PROJECTOR_PLUGIN, "files", 0, 1, False)
    return PluginUse(run, metadata.PROJECTOR_PLUGIN, "files", len(_TENSOR_NAME.findall(text)), 1, False)


def _plugin_folders(run: str, path: str) -> list[PluginUse]:
    plugins = os.path.join(path, "plugins")
    if os.path.islink(plugins):  # NOTE: links are not followed (they may lead outside the log directory)
        return []
    try:
        entries = sorted(os.scandir(plugins), key=lambda entry: entry.name)
    except OSError:
        return []
    uses = []
    for entry in entries:
        if not entry.is_dir(follow_symlinks=False):
            continue
        files = sum(len(names) for _, _, names in os.walk(entry.path))
        try:
            children = sum(1 for _ in os.scandir(entry.path))
        except OSError:
            children = 0
        uses.append(PluginUse(run, entry.name, "files", children, files, entry.name in SHOWN_FILE_PLUGINS))
    return uses


def plugin_uses(store: LogdirStore) -> list[PluginUse]:
    """Per run (hparams sub-runs folded into their parent) and plugin: how much data there is, and whether shown."""
    uses: list[PluginUse] = []
    counts = store.plugin_tag_counts()
    for summary in store.runs():
        run = summary.name
        if summary.scalar_tags:
            uses.append(PluginUse(run, metadata.SCALARS_PLUGIN, "events", summary.scalar_tags, summary.points, True))
        if summary.histogram_tags:
            uses.append(PluginUse(run, metadata.HISTOGRAMS_PLUGIN, "events", summary.histogram_tags, 0, True))
        for plugin, tags in sorted(counts.get(run, {}).items()):
            drawn = SHOWN_EVENT_TAGS.get(plugin)
            if drawn is None:
                uses.append(PluginUse(run, plugin, "events", len(tags), sum(tags.values()),
                                      plugin in SHOWN_EVENT_PLUGINS))
                continue
            for shown in (True, False):  # the tags a page draws, then the rest
                part = {tag: count for tag, count in tags.items() if drawn(tag) == shown}
                if part:
                    uses.append(PluginUse(run, plugin, "events", len(part), sum(part.values()), shown))
        try:
            path = str(store.run_path(run))
        except UnknownSeries:
            continue
        projector = _projector(run, path)
        uses += ([projector] if projector else []) + _plugin_folders(run, path)
    return uses


def not_shown(uses: list[PluginUse]) -> dict[str, tuple[int, int]]:
    """Plugin → (runs, tags) of the data this board does not draw."""
    result: dict[str, tuple[int, int]] = {}
    for use in uses:
        if not use.shown:
            runs, tags = result.get(use.plugin, (0, 0))
            result[use.plugin] = (runs + 1, tags + use.tags)
    return dict(sorted(result.items()))
