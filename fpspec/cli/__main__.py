"""`python -m fpspec.cli ...`: the same command line as `python -m fpspec` and `fpspec`."""
from fpspec.cli import entry

entry()
