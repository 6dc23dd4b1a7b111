"""Jobs and events sent when the database transaction commits: never for a transaction
rolled back, at once outside a transaction (as ``transaction.on_commit`` runs its
callback). Arguments are checked at the call, before anything is registered."""
from __future__ import annotations

from typing import Any, Mapping, Optional

from django.db import transaction

from ...base import validate as check
from ...base.util import Seconds
from ._settings import get_hub


def _on_commit(send: Any, using: Optional[str], robust: bool) -> None:
    transaction.on_commit(send, using=using, robust=robust)


def _check(using: Optional[str], robust: bool) -> None:
    check.optional_string(using, "using")
    check.boolean(robust, "robust")


def add_on_commit(queue_name: str, name: str, data: Any = None, *,
                  using: Optional[str] = None, robust: bool = False, **opts: Any) -> None:
    """``get_queue(queue_name).add(name, data, **opts)`` once the transaction of the
    database ``using`` commits. Everything is checked now as ``Queue.add`` checks it;
    ``data`` is copied now. The add runs in the committing thread: its failure
    (Redis down) raises from the ``atomic`` block's exit, after the commit, or is
    logged by Django with ``robust=True``."""
    _check(using, robust)
    _on_commit(get_hub().prepare_add(queue_name, name, data, **opts), using, robust)


def emit_on_commit(event_name: str, payload: Any = None,
                   meta: Optional[Mapping[str, Any]] = None, *,
                   delay: Optional[Seconds] = None, timeout: Optional[Seconds] = None,
                   idempotency_key: Optional[str] = None, causation_id: Optional[str] = None,
                   using: Optional[str] = None, robust: bool = False) -> None:
    """``get_events().emit(...)`` once the transaction commits, expecting no result
    (the subscriber runs; nobody waits for its answer). Checked now as ``emit`` checks
    it (meta and causation id from the propagation context now); ``payload`` is copied
    now. A failed add raises as ``add_on_commit``'s does; ``timeout`` bounds it."""
    _check(using, robust)
    _on_commit(get_hub().prepare_emit(event_name, payload, meta, delay=delay, timeout=timeout,
                                      idempotency_key=idempotency_key,
                                      causation_id=causation_id), using, robust)
