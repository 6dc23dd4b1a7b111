"""Job handlers of the test project (``shop.tasks:mark_paid`` for orijs_worker)."""
from shop.models import Order


def mark_paid(job):
    updated = Order.objects.filter(pk=job.data["order"]).update(paid=True)
    return {"order": job.data["order"], "updated": updated}
