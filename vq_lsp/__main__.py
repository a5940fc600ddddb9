"""`python -m vq_lsp ...`: the `vq-lsp` command where no console script is installed (a source
checkout on PYTHONPATH, as on a machine that only runs benchmarks)."""

import sys

from vq_lsp.cli import main

sys.exit(main())
