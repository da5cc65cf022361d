"""``python -m autodev``: the same entry point as the ``autodev`` console script."""

from autodev.cli import main

if __name__ == "__main__":
    main()
