"""The run tests' box (inventory host `gpu1` on LocalHost or over the test sshd, with a durable
root; runs stopped afterwards), shared from tests/run/jobs."""

from tests.run.jobs.conftest import durable_box

__all__ = ["durable_box"]
