"""The experiments, one module per family, and their command:
`python -m convoy_lab.experiments` (the command line is in `cli`).

Kept free of imports so that `from ..experiments.catalog import ...` from the
report or the fleet package does not pull in every experiment."""
