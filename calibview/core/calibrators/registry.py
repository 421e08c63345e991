"""The calibrators by name: every family registered (temperature, scaling, binning) and the functions that look
them up, configure, fit and load them."""

from calibview.core.calibrators.base import *  # noqa: F401,F403  (transitional: the registry split follows)
from calibview.core.calibrators.base import Fitted, Method, available, configured, fit, fit_temperature, from_json, get, option_types, register  # noqa: F401
