"""A test runner with a throwaway Redis: ``TEST_RUNNER =
"orijs_sync.contrib.django.test_runner.OrijsTestRunner"``. For the run it starts a
``redis-server`` (from PATH) on a free loopback port and points
``settings.ORIJS_SYNC['connection']`` at it, the other keys kept; afterwards it stops
that server, whose data is thrown away."""
from __future__ import annotations

from typing import Any, Optional

from django.conf import settings
from django.test.runner import DiscoverRunner
from django.test.utils import override_settings

from ...base import validate as check
from ...testing import RedisServer
from ._settings import SETTING


class OrijsTestRunner(DiscoverRunner):
    """``DiscoverRunner`` with a throwaway Redis for the run (``redis_url`` has its URL)."""

    redis: Optional[RedisServer] = None
    _override: Optional[override_settings] = None

    @property
    def redis_url(self) -> Optional[str]:
        return self.redis.url if self.redis is not None else None

    def setup_test_environment(self, **kwargs: Any) -> None:
        super().setup_test_environment(**kwargs)
        current = check.mapping(getattr(settings, SETTING, None), SETTING)
        self.redis = RedisServer().start()
        self._override = override_settings(**{SETTING: {**current,
                                                        "connection": self.redis.url}})
        self._override.enable()

    def teardown_test_environment(self, **kwargs: Any) -> None:
        try:
            if self._override is not None:
                self._override.disable()      # the hub on the throwaway Redis is closed
                self._override = None
        finally:
            if self.redis is not None:
                self.redis.stop()
                self.redis = None
            super().teardown_test_environment(**kwargs)
