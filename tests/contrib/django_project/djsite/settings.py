"""A tiny Django project for the integration's tests: SQLite in a temp dir (the test
gives its path in ORIJS_TEST_SQLITE, so a worker subprocess shares it), one app, and the
dashboard under /jobs/ for staff users (sessions and auth for that)."""
import os
import tempfile

SECRET_KEY = "only-for-tests"
DEBUG = False
ALLOWED_HOSTS = ["*"]
INSTALLED_APPS = ["django.contrib.auth", "django.contrib.contenttypes",
                  "django.contrib.sessions", "orijs_sync.contrib.django", "shop"]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
]
TEMPLATES = [{"BACKEND": "django.template.backends.django.DjangoTemplates",
              "DIRS": [os.path.join(os.path.dirname(__file__), "templates")]}]
ROOT_URLCONF = "djsite.urls"
USE_TZ = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ.get("ORIJS_TEST_SQLITE")
        or os.path.join(tempfile.mkdtemp(prefix="orijs-django-"), "db.sqlite3"),
        "OPTIONS": {"timeout": 20},
    }
}
ORIJS_SYNC = {
    "connection": os.environ.get("ORIJS_TEST_REDIS_URL", "redis://127.0.0.1:6379/0"),
    "prefix": "bull",
    "events": {"default_timeout": 20},
}
TEST_RUNNER = "orijs_sync.contrib.django.test_runner.OrijsTestRunner"
