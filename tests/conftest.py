pytest_plugins = ["rlmnb.testing.fixtures", "sandbox_support", "browser_support", "ci_confinement"]

