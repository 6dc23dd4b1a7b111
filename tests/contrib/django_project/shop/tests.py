"""Run by ``manage.py test shop`` (tests/contrib/test_django.py): OrijsTestRunner gives
the run a throwaway Redis; a job added on commit there is processed."""
import os

from django.conf import settings
from django.test import TestCase

from orijs_sync import Worker
from orijs_sync.contrib.django import add_on_commit, get_queue
from orijs_sync.testing import wait_until


class ThrowawayRedisTests(TestCase):
    def test_the_run_has_its_own_redis(self):
        url = settings.ORIJS_SYNC["connection"]
        self.assertNotEqual(url, os.environ["ORIJS_TEST_REDIS_URL"])
        self.assertEqual(settings.ORIJS_SYNC["prefix"], "bull")       # the rest kept
        print(f"THROWAWAY {url}", flush=True)
        queue = get_queue("runner")
        with self.captureOnCommitCallbacks(execute=True):
            add_on_commit("runner", "double", {"n": 21}, job_id="only")
            self.assertIsNone(queue.get_job("only"))           # not before the commit
        with Worker("runner", lambda job: job.data["n"] * 2, connection=url):
            wait_until(lambda: queue.get_job_state("only") == "completed", 20)
        self.assertEqual(queue.get_job("only").returnvalue, 42)
