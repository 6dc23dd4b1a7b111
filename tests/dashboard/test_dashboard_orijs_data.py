"""The dashboard's reads of group queues, job schedulers, events and workflows, against
real data made by the library's producers and workers on a real Redis."""
from __future__ import annotations

from typing import Iterator

import pytest
import redis
from dash_orijs_data import fill_events, fill_groups, fill_scheduler, fill_workflow

from orijs_sync.dashboard import data_groups, data_orijs, data_schedulers


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    c = redis.Redis.from_url(redis_url, decode_responses=True)
    yield c
    c.close()


def test_group_queue_lists_groups_in_order_and_shows_stuck_groups(redis_url, namespace,
                                                                  client):
    name = f"gq-{namespace}"
    ids = fill_groups(redis_url, name)
    names, truncated = data_groups.list_group_queues(client)
    assert name in names and not truncated
    state = data_groups.read_group_queue(client, name)
    by_id = {g.id: g for g in state.groups}
    assert [j.id for j in by_id["customer-1"].waiting] == [ids["c1-0"], ids["c1-1"], ids["c1-2"]]
    assert by_id["customer-1"].waiting_count == 3 and by_id["customer-1"].stuck is None
    assert by_id["customer-2"].stuck is None
    lock = by_id["stuck-lock"]
    assert lock.active is not None and lock.active.id == ids["lock"]
    assert lock.stuck and lock.stuck.startswith("lock expired")
    assert by_id["stuck-lost"].stuck and by_id["stuck-lost"].stuck.startswith("not ready")
    assert {g.id for g in state.stuck} == {"stuck-lock", "stuck-lost"}
    assert [g.id for g in state.groups[:2]] == ["stuck-lock", "stuck-lost"]   # stuck first
    assert [j.id for j in state.failed] == [ids["failed"]]
    assert state.failed[0].failed_reason == "card declined"
    assert state.counts["completed"] == 1 and state.counts["active"] == 1
    job = data_groups.read_group_job(client, name, ids["lock"])
    assert job is not None and job.status == "active" and job.data == {"task": "hangs"}


def test_a_paused_group_queue_has_no_stuck_group(redis_url, namespace, client):
    name = f"gq-{namespace}"
    fill_groups(redis_url, name)
    client.set(f"groupmq:{name}:paused", "1")
    assert data_groups.read_group_queue(client, name).stuck == []


def test_queue_name_of_ignores_group_and_job_keys():
    assert data_groups.queue_name_of("groupmq:orders:groups") == "orders"
    assert data_groups.queue_name_of("groupmq:orders:g:failed") is None
    assert data_groups.queue_name_of("groupmq:orders:job:failed") is None
    assert data_groups.queue_name_of("bull:orders:failed") is None


def test_scheduler_has_its_next_run_and_latest_runs(redis_url, namespace, client):
    qname = f"sq-{namespace}"
    first = fill_scheduler(redis_url, qname)
    queues, _ = data_schedulers.scheduler_queues(client, "bull")
    assert qname in queues
    [state] = data_schedulers.read_schedulers(client, "bull", qname)
    assert state.info.id == "hourly-report" and state.info.every == 3600
    assert state.next_run is not None and state.info.next is not None
    assert state.next_run.timestamp() * 1000 == pytest.approx(state.info.next)
    assert [r.id for r in state.runs][-1] == first
    assert [r.state for r in state.runs] == ["delayed", "completed"]
    assert state.runs[0].run_at == state.info.next


def test_event_type_with_a_failing_subscriber(redis_url, namespace, client):
    event = f"stock.{namespace}"
    fill_events(redis_url, event)
    types, _ = data_orijs.read_event_types(client)
    [mine] = [t for t in types if t.name == event]
    assert mine.queue == f"event.{event}" and mine.counts["failed"] == 1
    [failure] = mine.failures
    assert failure.failed_reason == "no stock for {'sku': 'book'}"
    assert failure.data["eventName"] == event and failure.data["payload"] == {"sku": "book"}


def test_workflow_execution_steps_in_order_with_the_failing_step_and_rollbacks(
        redis_url, namespace, client):
    name = f"Order{namespace}"
    flow_id = fill_workflow(redis_url, name)
    names, _ = data_orijs.read_workflows(client)
    assert name in names
    [row] = data_orijs.read_executions(client, name)
    assert row.id == flow_id and row.state in ("failing", "failed")
    assert row.failed_reason and row.failed_reason.startswith("child ")
    execution = data_orijs.read_execution(client, name, flow_id)
    assert execution is not None
    assert [s.name for s in execution.steps] == ["reserve", "charge", "ship"]
    assert [s.job.state for s in execution.steps] == ["completed", "completed", "failed"]
    assert execution.failing_step is execution.steps[2]
    assert execution.rolled_back == ["charge", "reserve"]
    assert execution.rollback_errors == []
    assert execution.steps[0].job.duration_ms is not None
    assert execution.steps[0].result == {"reserved": 2}
    assert execution.failure_record and "out of stock" in execution.failure_record
