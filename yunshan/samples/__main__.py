"""`python -m yunshan.samples --out DIR [--seed S] [--scale X]`: write the sample tree (see writer.py)."""

import sys

from .writer import main

sys.exit(main())
