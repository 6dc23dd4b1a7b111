"""``python -m orijs_sync.cli``: the ``orijs-sync`` command."""
import sys

from .main import main

sys.exit(main())
