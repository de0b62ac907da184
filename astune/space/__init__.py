"""Search spaces without Ray: YAML files, parameters and their checks, the define-by-run function.

``search/`` (Ray Tune) and ``confirm/`` both read spaces from here; nothing here imports Ray.
"""

from astune.space.files import available_spaces
from astune.space.params import SpaceError
from astune.space.space import SearchSpace, load_space

__all__ = ["SearchSpace", "SpaceError", "available_spaces", "load_space"]
