"""Extension -> agent profile: typed config and routing. Pure data; imports no model code."""

from dialplan.config import Config, ConfigError, load_config, parse_config
from dialplan.plan import Dialplan
from dialplan.profile import Profile

__all__ = ["Config", "ConfigError", "Dialplan", "Profile", "load_config", "parse_config"]
