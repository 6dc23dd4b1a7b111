"""Bridges to other tools, each an optional extra: ``prometheus`` (Prometheus metrics from
the listener hooks) and ``otel`` (OpenTelemetry spans carried as BullMQ carries them).
Imported as ``orijs_sync.prometheus`` and ``orijs_sync.otel`` (thin re-exports).

May import: the public classes and anything below them; nothing imports this folder
but those two re-exports.
"""
