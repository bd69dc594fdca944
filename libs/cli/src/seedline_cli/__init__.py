"""seedline_cli."""
