"""The package version, kept apart so reading it imports nothing else."""

__version__ = "0.1.0"
