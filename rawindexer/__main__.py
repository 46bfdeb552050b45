"""`python -m rawindexer ...`: see rawindexer/cli.py."""
import sys

from .cli import main

sys.exit(main())
