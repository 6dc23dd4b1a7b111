"""``python -m orijs_sync``: the ``orijs-sync`` command."""
import sys

from .cli import main

sys.exit(main())
