"""seedline_core."""
