"""``python -m corebench.harness.cli``: the `corebench` command."""

import warnings

from ..registry import PluginWarning
from . import main

if __name__ == "__main__":  # not again in a spawned child (multiprocessing imports this)
    warnings.simplefilter("default", PluginWarning)
    main()
