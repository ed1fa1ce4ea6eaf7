"""``python -m corebench.harness.cli``: the `corebench` command."""

import warnings

from ..registry import PluginWarning
from . import main

warnings.simplefilter("default", PluginWarning)
main()
