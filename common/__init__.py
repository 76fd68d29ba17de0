"""Shared infrastructure: config, atomic I/O, run manifests, runtime set-up, file contracts.

Imports nothing of the project."""
