pytest_plugins = ["seedline_platform.testing"]
