pytest_plugins = ["rlmnb.testing.fixtures", "sandbox_support"]
