pytest_plugins = ["rlmnb.testing.fixtures"]
