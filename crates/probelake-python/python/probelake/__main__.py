"""`python -m probelake`: the `probelake` command."""

from ._cli import main

main()
