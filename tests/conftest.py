# The redis_url and namespace fixtures come from the orijs_sync pytest plugin
# (orijs_sync/testing.py), registered by the package's pytest11 entry point.
