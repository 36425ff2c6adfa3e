"""``python -m metricdp``: the same command line as the ``metricdp`` script."""

from .cli import main

if __name__ == "__main__":
    main()
