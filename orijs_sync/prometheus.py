"""``orijs_sync.prometheus``, the import path users know: re-exported from
``orijs_sync.integrations.prometheus`` (``pip install orijs_sync[prometheus]``)."""
from __future__ import annotations

from .integrations.prometheus import PrometheusMetrics

__all__ = ["PrometheusMetrics"]
