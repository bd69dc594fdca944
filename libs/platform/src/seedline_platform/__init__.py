"""seedline_platform."""
