"""10,000 emits leave no entry behind in any internal map (both providers).

Mixed on purpose: results, fire-and-forget, timeouts (an event type nobody handles),
handler failures and idempotency duplicates all go through the same maps.
"""
from __future__ import annotations

import pytest

from orijs_sync import errors
from events_helpers import all_zero, wait_until

TOTAL = 10_000


def test_ten_thousand_emits_leave_empty_maps(make_provider):
    provider = make_provider(default_job_options={"attempts": 1, "remove_on_complete": True,
                                                  "remove_on_fail": True},
                             default_worker_options={"concurrency": 20})

    def handler(message):
        if message.payload % 97 == 0:
            raise ValueError("multiple of 97")
        return message.payload + 1

    provider.subscribe("load", handler)
    answered, timeouts, failures, fire_and_forget = [], [], [], []
    for n in range(TOTAL):
        if n % 10 == 0:
            fire_and_forget.append(provider.emit("load", n, expects_result=False))
        elif n % 10 == 1:
            timeouts.append(provider.emit("load.nobody", n, timeout=0.05))
        elif n % 10 == 2 and n % 97 != 0:
            # pairs of emits sharing one key: one job, two futures
            key = f"pair-{n}"
            answered.append((n, provider.emit("load", n, idempotency_key=key)))
            answered.append((n, provider.emit("load", n, idempotency_key=key)))
        elif n % 97 == 0:
            failures.append(provider.emit("load", n))
        else:
            answered.append((n, provider.emit("load", n)))
    for n, sub in answered:
        assert sub.result(timeout=60) == n + 1
    for sub in failures:
        with pytest.raises(errors.JobFailed):
            sub.result(timeout=60)
    for sub in timeouts:
        with pytest.raises(errors.TimeoutError):
            sub.result(timeout=60)
    for sub in fire_and_forget:
        assert sub.result(timeout=60) is None
    assert len(answered) + len(failures) + len(timeouts) + len(fire_and_forget) > TOTAL
    # The timed-out events are still queued (as in Redis): let a late subscriber drain them.
    provider.subscribe("load.nobody", lambda message: None)
    # Worker listeners (metrics bookkeeping) may finish just after the futures settle.
    wait_until(lambda: all(v == 0 for k, v in provider.stats().items()
                           if k != "idempotency_records"), timeout=30, what="empty maps")
    provider.stop()
    assert all_zero(provider)
