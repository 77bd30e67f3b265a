"""`python -m yunshan.cli ...` is `yunshan ...` (what `accelerate launch -m yunshan.cli` runs on every process)."""

import sys

from yunshan.cli import main

sys.exit(main())
