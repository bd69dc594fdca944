"""seedline_contracts."""
