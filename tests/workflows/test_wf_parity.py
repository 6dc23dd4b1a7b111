"""OriJS parity for a team porting a TypeScript service (issue 20): the reference's hooks,
defaults and lookups, on both providers (in-process and BullMQ)."""
from __future__ import annotations

from typing import Any, List

import pytest

from orijs_sync.workflows import Workflow, WorkflowFailedError
from wf_helpers import GUARD, Journal


def test_on_error_runs_once_after_the_rollbacks_with_the_results_so_far(make_provider):
    j = Journal()
    seen: List[Any] = []

    def on_error(ctx: Any, error: BaseException) -> None:
        j.add("on_error")
        seen.append((ctx.flow_id, ctx.workflow_name, ctx.data, ctx.meta, ctx.step_name,
                     dict(ctx.results), error))
        raise RuntimeError("the hook itself broke")       # logged, not the caller's error

    wf = (Workflow("Hooked", on_error=on_error)
          .step("a", j.step("a", {"n": 1}), j.rollback("a"))
          .parallel(("b", j.step("b", 2)), ("c", j.step("c", fail=True)))
          .step("d", j.step("d")))
    provider = make_provider(wf)
    handle = provider.execute(wf, {"orderId": 7}, meta={"traceId": "t-9"})
    with pytest.raises(WorkflowFailedError) as info:
        handle.result(timeout=GUARD)
    assert (info.value.primary.step_name, info.value.primary.message) == ("c", "c failed")
    assert seen == [(handle.id, "Hooked", {"orderId": 7}, {"traceId": "t-9"}, "c",
                     {"a": {"n": 1}, "b": 2}, info.value)]
    entries = list(j)
    assert sorted(entries[1:3]) == ["b", "c"] and entries[3:] == ["rollback:a", "on_error"]


def test_on_error_must_be_callable():
    with pytest.raises(TypeError, match="on_error"):
        Workflow("Bad", on_error="not a function")  # type: ignore[arg-type]
