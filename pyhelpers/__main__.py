"""`python -m pyhelpers ...`: the same CLI as the `pyhelpers` console script."""

from pyhelpers.cli import main

main()
