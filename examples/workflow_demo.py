"""Workflow demo: an order workflow (validate -> charge -> email + sms -> fulfill) on a
Redis (yours via REDIS_URL, else a throwaway redis-server), one success, one failure
with its rollback, and the same workflow on the in-process provider.

    python examples/workflow_demo.py
"""
from __future__ import annotations

import uuid

from orijs_sync.testing import delete_keys, local_redis
from orijs_sync.workflows import (
    BullMQWorkflowProvider,
    InProcessWorkflowProvider,
    Workflow,
    WorkflowFailedError,
)


def validate(ctx):
    if not ctx.data.get("items"):
        raise ValueError("an order needs items")
    return {"total": sum(item["price"] for item in ctx.data["items"])}


def charge(ctx):
    total = ctx.get_result("validate")["total"]
    if ctx.data.get("card") == "declined":
        raise RuntimeError(f"card declined for {total}")
    return {"chargeId": f"ch_{ctx.flow_id[:8]}", "amount": total}


def refund(ctx):
    ctx.log.warning("refunding %s", ctx.get_result("charge"))


def send_email(ctx):
    return {"to": ctx.data["email"]}


def send_sms(ctx):
    return {"to": ctx.data.get("phone", "none")}


def fulfill(ctx):
    if ctx.data.get("out_of_stock"):
        raise LookupError("out of stock")
    return {"shipped": [item["sku"] for item in ctx.data["items"]]}


def summary(ctx):
    return {"order": ctx.data["orderId"], "charged": ctx.get_result("charge")["amount"],
            "shipped": ctx.get_result("fulfill")["shipped"]}


ORDER = (Workflow("OrderWorkflow", on_complete=summary)
         .step("validate", validate)
         .step("charge", charge, rollback=refund)
         .parallel(("email", send_email), ("sms", send_sms))
         .step("fulfill", fulfill))

ORDER_DATA = {"orderId": "1", "email": "ada@example.com",
              "items": [{"sku": "book", "price": 12}, {"sku": "pen", "price": 3}]}


def run(provider) -> None:
    provider.register(ORDER)
    with provider:
        handle = provider.execute(ORDER, ORDER_DATA, idempotency_key="order-1",
                                  meta={"requestId": "demo"})
        print(f"  {handle.id}: {handle.result(timeout=35)} ({handle.status()})")
        again = provider.execute(ORDER, ORDER_DATA, idempotency_key="order-1")
        print(f"  same key again: {again.result(timeout=35)} (ran once)")
        failing = provider.execute(ORDER, dict(ORDER_DATA, orderId="2", out_of_stock=True))
        try:
            failing.result(timeout=35)
        except WorkflowFailedError as exc:
            print(f"  {failing.id}: {exc.primary} -> rolled back {exc.rolled_back}")


def main() -> None:
    with local_redis() as url:
        prefix = f"demo-{uuid.uuid4().hex[:6]}.workflow"
        print(f"BullMQWorkflowProvider on {url}")
        try:
            run(BullMQWorkflowProvider(url, queue_prefix=prefix))
        finally:
            delete_keys(url, f"*{prefix}*")
    print("InProcessWorkflowProvider")
    run(InProcessWorkflowProvider())


if __name__ == "__main__":
    main()
