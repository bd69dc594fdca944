"""seedline_continuity_resolver."""
