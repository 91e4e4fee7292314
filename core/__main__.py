"""``python -m rechunk``: the command line, the same as the ``rechunk`` command."""

from rechunk.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
