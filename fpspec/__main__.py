import sys

try:
    from fpspec.cli import entry
except KeyboardInterrupt:
    # Ctrl-C while the libraries load: the same one line as during the work
    print("fpspec: interrupted", file=sys.stderr)
    sys.exit(130)

entry()
