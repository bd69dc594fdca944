"""seedline_runner."""
