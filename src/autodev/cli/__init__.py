"""The ``autodev`` command line (click + rich): the only layer that prints."""

from autodev.cli.app import cli, main

__all__ = ["cli", "main"]
