pytest_plugins = ["seedline_devtools.testing"]
