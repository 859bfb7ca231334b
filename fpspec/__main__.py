from fpspec.cli import entry

entry()
