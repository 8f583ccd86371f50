"""`python -m kernelseek ...` (the GPU machine runs the checkout this way, with PYTHONPATH=.)."""
import sys

from .cli import main

sys.exit(main())
