"""What the QDS loop did (docs/records.md "qds_flows, qds_classes"): how often the
classifier named a flow's type right, and how the flows spread over the budget classes
over time. Pure functions of the records; plotting is the report's."""

from __future__ import annotations

import math

import pandas as pd

from .. import _native

__all__ = ["CONTROLLER_TYPES", "class_occupancy", "confusion", "summarize_qds"]

# thinwan_proto::qds::classify::AppType, in index order (the app / app_true codes): the core's.
CONTROLLER_TYPES: tuple[str, ...] = tuple(_native.app_types()[1])


def summarize_qds(flows: pd.DataFrame, classes: pd.DataFrame) -> dict[str, float]:
    """Flat summary keys of a QDS run: ``qds_classifier_accuracy`` (share of (period,
    flow) rows whose type the controller used is the true one; 1 in oracle mode),
    ``qds_periods`` and ``qds_mean_class_<type>`` (the mean class of each true type's
    flows, 0 = most urgent)."""
    if flows.empty:
        return {}
    out: dict[str, float] = {
        "qds_classifier_accuracy": float((flows["app"] == flows["app_true"]).mean()),
        "qds_periods": float(classes["t"].nunique()) if not classes.empty else math.nan,
    }
    for code, rows in flows.groupby("app_true"):
        out[f"qds_mean_class_{CONTROLLER_TYPES[int(code)]}"] = float(rows["class"].mean())
    return out


def confusion(flows: pd.DataFrame) -> pd.DataFrame:
    """Rows: true type, columns: the type used; counts of (period, flow) rows."""
    names = list(CONTROLLER_TYPES)
    table = pd.crosstab(flows["app_true"].map(lambda c: names[int(c)]), flows["app"].map(lambda c: names[int(c)]))
    return table.reindex(index=names, columns=names, fill_value=0)


def class_occupancy(flows: pd.DataFrame) -> pd.DataFrame:
    """Per period (index ``t``) and class (columns), the number of flows in it."""
    return flows.pivot_table(index="t", columns="class", values="conn", aggfunc="count", fill_value=0)
