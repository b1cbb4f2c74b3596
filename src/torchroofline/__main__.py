"""``python -m torchroofline``."""

import sys

from .cli import main

sys.exit(main())
