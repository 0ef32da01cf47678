"""labkit: the helper package of Accelerator Labs, a hands-on course on GPU vs TPU for AI.

Labs import it as ``import labkit``; the first cell calls :func:`labkit.setup`. Importing
labkit never initialises JAX, so device simulation can still be set up.
"""

from labkit.bootstrap import resolve_profile, runtime, setup
from labkit.report import record, recorded

__all__ = ["setup", "runtime", "resolve_profile", "record", "recorded"]
__version__ = "0.1.0"
