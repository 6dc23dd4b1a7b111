"""``orijs_sync.otel``, the import path users know: re-exported from
``orijs_sync.integrations.otel`` (``pip install orijs_sync[otel]``)."""
from __future__ import annotations

from .integrations.otel import Telemetry

__all__ = ["Telemetry"]
