"""Metrics through the host's ``metrics`` import, built with :class:`Metric`.

These are the metric operations of shell-operator's ``$METRICS_PATH``: counters are
added to, gauges are set, histograms observe values, and a whole group of series can be
expired at once. The host exports them with the guest's name as a label::

    Metric.counter("pods_labelled_total").label("namespace", "default").add(1)
    Metric.gauge("disk_used_percent").label("mount", "/var").group("disk").set(91)
    Metric.histogram("scan_seconds", buckets=[0.1, 1, 10]).observe(0.4)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from componentize_py_types import Err
from wit_world.imports import metrics as _wit
from wit_world.imports.metrics import MetricOperation, Observation, Sample

from .errors import Error

__all__ = ["Metric", "MetricOperation", "expire_group", "submit"]


class Metric:
    """One metric series: a name, labels, an optional group, and for histograms buckets.

    Build it with :meth:`counter`, :meth:`gauge` or :meth:`histogram`, then call
    :meth:`add`, :meth:`set` or :meth:`observe`: the host checks that a series keeps
    one kind.
    """

    __slots__ = ("name", "labels", "group_name", "buckets")

    def __init__(
        self,
        name: str,
        labels: Mapping[str, str] | None = None,
        group: str | None = None,
        buckets: Iterable[float] = (),
    ) -> None:
        self.name: str = name
        """The metric name, e.g. ``operon_pods_total``."""
        self.labels: list[tuple[str, str]] = list((labels or {}).items())
        """The labels that identify the series, in order."""
        self.group_name: str | None = group
        """Lets :func:`expire_group` drop series that a later run no longer reports."""
        self.buckets: list[float] = [float(bound) for bound in buckets]
        """Histogram bucket upper bounds, ascending; unused by the other kinds."""

    @classmethod
    def counter(cls, name: str, labels: Mapping[str, str] | None = None) -> Metric:
        """The counter ``name``: a value that only grows, changed with :meth:`add`."""
        return cls(name, labels)

    @classmethod
    def gauge(cls, name: str, labels: Mapping[str, str] | None = None) -> Metric:
        """The gauge ``name``: a value that is :meth:`set`."""
        return cls(name, labels)

    @classmethod
    def histogram(
        cls, name: str, buckets: Iterable[float] = (), labels: Mapping[str, str] | None = None
    ) -> Metric:
        """The histogram ``name``, whose values are :meth:`observe`\\ d into ``buckets``."""
        return cls(name, labels, buckets=buckets)

    def label(self, key: str, value: str) -> Metric:
        """Adds the label ``key`` = ``value`` to the series."""
        self.labels.append((key, value))
        return self

    def group(self, group: str) -> Metric:
        """Puts the series in ``group``, so that :func:`expire_group` can remove it."""
        self.group_name = group
        return self

    def add(self, value: float) -> None:
        """Adds ``value`` to the counter."""
        submit(_wit.MetricOperation_Add(self._sample(value)))

    def set(self, value: float) -> None:
        """Sets the gauge to ``value``."""
        submit(_wit.MetricOperation_Set(self._sample(value)))

    def observe(self, value: float) -> None:
        """Observes ``value`` in the histogram."""
        submit(
            _wit.MetricOperation_Observe(
                Observation(
                    self.name, float(value), list(self.buckets), list(self.labels), self.group_name
                )
            )
        )

    def _sample(self, value: float) -> Sample:
        return Sample(self.name, float(value), list(self.labels), self.group_name)


def expire_group(group: str) -> None:
    """Removes every series of ``group`` that this run did not set again."""
    submit(_wit.MetricOperation_ExpireGroup(group))


def submit(operation: MetricOperation) -> None:
    """Queues one operation in the contract's shape; :class:`Metric` is usually simpler."""
    try:
        _wit.submit(operation)
    except Err as err:
        raise Error(f"submitting a metric: {err.value}") from None
