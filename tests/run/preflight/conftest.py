"""The run tests' box (inventory host `gpu1`, on this machine or over the test sshd)."""

from tests.run.jobs.conftest import durable_box  # noqa: F401  (a fixture, used by name)
