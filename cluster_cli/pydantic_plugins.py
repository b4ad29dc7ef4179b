"""pydantic's plugin lookup left out of `validate` and `render` (issue 17 item 5: start-up counts).

pydantic looks for plugins when it builds its first model's validator: `pydantic.plugin._loader`
imports `importlib.metadata` (email, zipfile, csv...: 15-25 ms CPU, a tenth of a 10,000-node
`render`) and scans every installed distribution's entry points. Its documented switch,
PYDANTIC_DISABLE_PLUGINS, skips the scan but not the import. `skip_plugin_lookup` puts in that
module's place one that answers `get_plugins()` as pydantic's does with the switch set to
`__all__` (no plugins), which the CLI wants anyway: a plugin has no business in its validation.

The module is pydantic's private one, so a pydantic change may only lose the gain, never break the
CLI: nothing is done outside pydantic 2 or once the real module is loaded, and any other name asked
of the stand-in brings the real module in (tests/unit/test_pydantic_plugins.py).
"""

from __future__ import annotations

import importlib
import sys
from types import ModuleType

LOADER = "pydantic.plugin._loader"


class _NoPlugins(ModuleType):
    """`pydantic.plugin._loader` as it is with PYDANTIC_DISABLE_PLUGINS=__all__, without its imports."""

    @staticmethod
    def get_plugins() -> tuple[()]:
        return ()

    def __getattr__(self, name: str) -> object:
        if name.startswith("__"):  # what the import system asks of any module (__path__, __file__)
            raise AttributeError(name)
        if sys.modules.get(LOADER) is self:  # a name this stand-in lacks: the real module from now on
            del sys.modules[LOADER]
        return getattr(importlib.import_module(LOADER), name)


def skip_plugin_lookup() -> None:
    """No pydantic plugin lookup in this process (a no-op where it would not be pydantic's own answer)."""
    if LOADER in sys.modules:
        return
    from pydantic.version import VERSION

    if VERSION.split(".")[0] == "2":
        sys.modules[LOADER] = _NoPlugins(LOADER)
