"""``python -m llm_roofline``: the command line (see ``cli``)."""

import sys

from .cli import main

sys.exit(main())
