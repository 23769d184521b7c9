"""Extension -> agent profile: typed config and routing. Pure data; imports no model code."""

from dialplan.config import Config, ConfigError, load_config, parse_config
from dialplan.options import Profile
from dialplan.plan import Dialplan

__all__ = ["Config", "ConfigError", "Dialplan", "Profile", "load_config", "parse_config"]
