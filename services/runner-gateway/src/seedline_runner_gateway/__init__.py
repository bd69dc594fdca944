"""seedline_runner_gateway."""
