"""Benchmarks: scripts that measure the engine, the server and the hints, each baseline beside the engine in one run.

Run each as a module from the repository root, `python -m benchmarks.NAME --help`; the figures, the
commands that produced them and the hardware they ran on are in benchmarks/README.md.
"""
