"""`python -m peagle_deploy.testing serve`: the emulator from a shell (peagle_deploy/testing/serve.py, docs/ci.md)."""

import sys

from .serve import main

sys.exit(main())
