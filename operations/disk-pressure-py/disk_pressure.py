"""Disk pressure: which filesystems are fuller than a threshold, from ``df -P`` output.

The Python twin of operations/disk-pressure, with the same parameters (``df``,
``input-key``, ``threshold``, default 85), results (``disk.pressure``,
``disk.worst_mount``, ``disk.worst_percent``, ``disk.over_threshold``,
``disk.threshold``), table, gauge ``disk_used_percent`` and error messages.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from operon_sdk import Error, Input, Metric, Output, log, operation

DEFAULT_THRESHOLD = 85
"""What ``threshold`` is when not given: the usual "disk almost full" alert level."""


@dataclass
class Filesystem:
    """One line of ``df -P``."""

    name: str
    mount: str
    used_percent: int


@operation
def run(input: Input) -> Output:
    key = input.param("input-key")
    if key is not None:
        df = input.require(key)
    else:
        found = input.param("df") or input.result("df")
        if found is None:
            raise Error("missing required parameter `df` (the output of `df -P`)")
        df = found
    text = input.param("threshold")
    threshold = DEFAULT_THRESHOLD if text is None else parse_threshold(text)
    filesystems = parse_df(df)
    worst = filesystems[0]
    for fs in filesystems:
        if fs.used_percent > worst.used_percent:
            worst = fs
    over = [fs for fs in filesystems if fs.used_percent >= threshold]

    for fs in filesystems:
        gauge = Metric.gauge("disk_used_percent").label("mount", fs.mount)
        gauge.label("filesystem", fs.name)
        if input.context.node is not None:
            gauge.label("node", input.context.node)
        gauge.set(fs.used_percent)
    log.info(
        f"{len(over)} of {len(filesystems)} filesystems at or over {threshold}%; "
        f"fullest is {worst.mount} at {worst.used_percent}%",
        pressure=bool(over),
    )
    return (
        Output()
        .result("disk.pressure", bool(over))
        .result("disk.worst_mount", worst.mount)
        .result("disk.worst_percent", worst.used_percent)
        .result("disk.over_threshold", ",".join(fs.mount for fs in over))
        .result("disk.threshold", threshold)
        .output(table(filesystems, threshold))
    )


def parse_threshold(text: str) -> int:
    """A percentage, with or without the ``%`` sign."""
    number = text.strip().rstrip("%")
    if re.fullmatch(r"\+?[0-9]+", number) and int(number) <= 100:
        return int(number)
    raise Error(f"parameter `threshold` must be a percentage from 0 to 100, got `{text}`")


def parse_df(text: str) -> list[Filesystem]:
    """Parses ``df -P`` output; a line that is neither the header nor a filesystem is an
    error naming the line, since a silently skipped line could hide a full disk."""
    filesystems = []
    for index, line in enumerate(text.split("\n")):
        line = line.strip()
        if not line or line.startswith("Filesystem"):
            continue
        try:
            parsed = parse_line(line)
        except ValueError as err:
            raise Error(
                f"`df` line {index + 1} (`{line}`) is not "
                f"`filesystem blocks used available capacity% mount`: {err}"
            ) from None
        if parsed is not None:
            filesystems.append(parsed)
    if not filesystems:
        raise Error("the `df` output lists no filesystems")
    return filesystems


def parse_line(line: str) -> Filesystem | None:
    """One filesystem line; ``None`` for one without a capacity (df prints ``-``)."""
    fields = line.split()
    # Mount points may contain spaces: the capacity column is the first `N%` (or `-`)
    # preceded by three numeric columns.
    capacity = next(
        (
            at
            for at in range(4, max(len(fields) - 1, 0))
            if is_capacity(fields[at]) and all(is_count(f) for f in fields[at - 3 : at])
        ),
        None,
    )
    if capacity is None:
        raise ValueError("no capacity column")
    if fields[capacity] == "-":
        return None
    used_percent = int(fields[capacity].rstrip("%"))
    if used_percent >= 2**32:
        raise ValueError(f"capacity `{fields[capacity]}`: number too large to fit in target type")
    return Filesystem(" ".join(fields[: capacity - 3]), " ".join(fields[capacity + 1 :]), used_percent)


def is_capacity(field: str) -> bool:
    return field == "-" or (field.endswith("%") and is_digits(field[:-1]))


def is_count(field: str) -> bool:
    return field == "-" or is_digits(field)


def is_digits(text: str) -> bool:
    return text != "" and text.isascii() and text.isdigit()


def table(filesystems: list[Filesystem], threshold: int) -> str:
    """Every filesystem, the ones at or over the threshold flagged."""
    mount_width = max([len("MOUNT")] + [len(fs.mount) for fs in filesystems])
    name_width = max([len("FILESYSTEM")] + [len(fs.name) for fs in filesystems])
    lines = [f"{'MOUNT':{mount_width}}  {'FILESYSTEM':{name_width}}  USE%\n"]
    for fs in filesystems:
        flag = f"  >= {threshold}%" if fs.used_percent >= threshold else ""
        lines.append(f"{fs.mount:{mount_width}}  {fs.name:{name_width}}  {fs.used_percent:>3}%{flag}\n")
    return "".join(lines)
