"""How a Slurm job's state, as squeue, sacct, the job completion log or scontrol report it, joins
the run dir's own record into the product's run state: the source is named, CANCELLED by a uid
is normalised, user failures and infrastructure failures are told apart, and a requeueable job
that was preempted is not over. The accounting lines are real (tests/fixtures/slurm)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcp_server.run.jobs.engines.slurm import slurm_state

US = "\x1f"
ACCOUNTING = {line.split("|")[0]: line.split("|", 2)[2] for line in
              (Path(__file__).parents[2] / "fixtures/slurm/sacct-states.txt").read_text().splitlines()[1:]}
RUNNING_OWN = "gone|-|-|120|1700000000"  # the wrapper has not recorded an end: Slurm decides


def line(own: str, said: str, source: str = "sacct", job: str = "7", requeue: str = "0") -> str:
    return US.join([own, job, requeue, source, said])


def evidence(state) -> str:
    return " ".join(state.evidence)


def test_cancelled_by_a_uid_reads_cancelled_and_names_who() -> None:
    s = slurm_state(line(RUNNING_OWN, ACCOUNTING["29919940"]))
    assert s.status == "cancelled" and "cancelled by uid 1977600432" in evidence(s)
    assert "Partition_Limit" in evidence(s) and "(sacct)" in evidence(s)


@pytest.mark.parametrize(("job", "why"), [("2699101", "time limit"), ("2699102", "memory limit"),
                                          ("2699103", "infrastructure failure, retry with the identical config")])
def test_slurm_kills_read_failed_with_what_they_mean(job: str, why: str) -> None:
    s = slurm_state(line(RUNNING_OWN, ACCOUNTING[job], source="jobcomp"))
    assert s.status == "failed" and why in evidence(s)
    assert "the job completion log (sacct -c)" in evidence(s)


def test_a_user_failure_is_not_called_retryable() -> None:
    s = slurm_state(line(RUNNING_OWN, ACCOUNTING["2699104"]))
    assert s.status == "failed" and s.exit_code == 1 and "retry" not in evidence(s)


def test_the_run_dirs_exit_code_wins_over_slurms_word_for_an_ordinary_end() -> None:
    s = slurm_state(line("exited|3|1700000100|120|1700000000", ACCOUNTING["2"], source="scontrol"))
    assert s.status == "failed" and s.exit_code == 3 and "(scontrol)" in evidence(s)


def test_a_time_limit_kill_wins_over_the_143_the_wrapper_recorded() -> None:
    s = slurm_state(line("exited|143|1700000100|120|1700000000", ACCOUNTING["2699101"]))
    assert s.status == "failed" and s.exit_code == 143 and "TIMEOUT" in evidence(s)


def test_completed_without_an_exit_file_says_the_run_dir_is_not_shared() -> None:
    s = slurm_state(line(RUNNING_OWN, ACCOUNTING["239023"]))
    assert s.status == "lost" and "shares" in evidence(s)


def test_a_preempted_job_that_may_requeue_is_queued_not_failed() -> None:
    requeued = slurm_state(line(RUNNING_OWN, "PREEMPTED|None|0:0", source="scontrol", requeue="1"))
    assert requeued.status == "queued" and "--requeue" in evidence(requeued)
    final = slurm_state(line(RUNNING_OWN, "PREEMPTED|None|0:0", source="scontrol", requeue="0"))
    assert final.status == "failed" and "preempted" in evidence(final)
    again = slurm_state(line("exited|143|1700000100|120|1700000000", "PENDING|BeginTime|", source="squeue",
                             requeue="1"))
    assert again.status == "queued", "squeue listing it PENDING again beats the killed attempt's exit code"


def test_pending_reasons_are_passed_on() -> None:
    s = slurm_state(line(RUNNING_OWN, "PENDING|QOSMaxGRESPerUser|", source="squeue"))
    assert s.status == "queued" and "QOSMaxGRESPerUser" in evidence(s) and "(squeue)" in evidence(s)


def test_a_job_slurm_forgot_with_no_exit_file_is_lost_and_says_who_was_asked() -> None:
    s = slurm_state(line(RUNNING_OWN, "", source=""))
    assert s.status == "lost" and "squeue, accounting, the job completion log and scontrol" in evidence(s)
    never = slurm_state(line(RUNNING_OWN, "", source="", job=""))
    assert never.status == "lost" and "never happened" in evidence(never)


def test_an_ended_command_while_slurm_is_still_completing_says_the_cause_follows() -> None:
    s = slurm_state(line("exited|143|1700000100|120|1700000000", "COMPLETING|None|", source="squeue"))
    assert s.status == "failed" and s.exit_code == 143 and "final state" in evidence(s)


KILLED_ATTEMPT = "exited|143|1700000100|120|1700000000"  # the wrapper recorded a TERM's 143


def test_a_requeued_job_slurm_runs_again_is_running_before_its_batch_script_clears_the_old_end() -> None:
    # The moment between Slurm starting the job again and the batch script removing the killed
    # attempt's exit file (the race a clean-clone CI run hit): the run is not failed.
    again = slurm_state(line(KILLED_ATTEMPT, "RUNNING|None|", source="squeue", requeue="2"))
    assert again.status == "running" and "runs the job again" in evidence(again)
    own_end = slurm_state(line("exited|0|1700000100|120|1700000000", "RUNNING|None|", source="squeue", requeue="1"))
    assert own_end.status == "succeeded", "an attempt that ended on its own is the run's end (its batch shell ends)"


def test_an_old_slurm_answer_never_turns_a_requeued_attempts_signal_into_the_runs_end() -> None:
    between_polls = slurm_state(line(KILLED_ATTEMPT, "PENDING|BeginTime|", source="squeue", requeue="2"), age_s=20)
    assert between_polls.status == "queued" and "next poll" in evidence(between_polls)


def test_slurms_final_word_on_a_requeue_job_stands() -> None:
    s = slurm_state(line(KILLED_ATTEMPT, ACCOUNTING["2699101"], requeue="2"))
    assert s.status == "failed" and "TIMEOUT" in evidence(s)


def test_a_requeue_jobs_attempt_killed_by_term_is_not_the_end_even_before_signalled_is_written() -> None:
    # The batch shell writes `signalled` a moment after the wrapper's exit code: the 143 says it.
    s = slurm_state(line(KILLED_ATTEMPT, "RUNNING|None|", source="squeue", requeue="1"))
    assert s.status == "running"
    natural = slurm_state(line("exited|1|1700000100|120|1700000000", "RUNNING|None|", source="squeue", requeue="1"))
    assert natural.status == "failed" and natural.exit_code == 1


def test_a_requeue_jobs_stopped_attempt_still_completing_is_not_the_end() -> None:
    # Under load squeue shows the stopped attempt COMPLETING before the requeue puts it back to
    # PENDING (a clean-clone run read `failed 143` there): the run is not over.
    s = slurm_state(line(KILLED_ATTEMPT, "COMPLETING|None|", source="squeue", requeue="1"))
    assert s.status == "running" and "runs the job again" in evidence(s)
    plain = slurm_state(line(KILLED_ATTEMPT, "COMPLETING|None|", source="squeue", requeue="0"))
    assert plain.status == "failed", "without --requeue a TERM's 143 is the run's end"


DOWN = "|slurm_load_jobs error: Unable to contact slurm controller (connect failure)|"  # squeue's own words


def test_a_controller_that_does_not_answer_leaves_a_stopped_requeue_attempt_unknown_not_failed() -> None:
    # A clean-clone CI run read `failed 143` for a requeued job: a Slurm that does not answer is no verdict.
    s = slurm_state(line(KILLED_ATTEMPT, DOWN, source="unanswered", requeue="1"))
    assert s.status == "unknown" and "did not answer" in evidence(s) and "may run it again" in evidence(s)
    assert "connect failure" in evidence(s), "squeue's own words say why"


def test_a_controller_that_does_not_answer_never_makes_a_started_job_lost() -> None:
    s = slurm_state(line(RUNNING_OWN, DOWN, source="unanswered") + "\x1f1")
    assert s.status == "unknown" and "had started" in evidence(s)


def test_an_exit_file_is_the_runs_end_when_slurm_does_not_answer_or_still_says_queued() -> None:
    own_end = "exited|2|1700000100|120|1700000000"
    silent = slurm_state(line(own_end, DOWN, source="unanswered"))
    assert silent.status == "failed" and silent.exit_code == 2 and "did not answer" in evidence(silent)
    # Slurm answered PENDING, the job then started and ended before the run dir was read.
    late = slurm_state(line(own_end, "PENDING|Resources|", source="squeue"))
    assert late.status == "failed" and late.exit_code == 2


def test_a_stopped_requeue_attempt_that_no_source_knows_is_unknown_not_the_runs_end() -> None:
    s = slurm_state(line(KILLED_ATTEMPT, "", source="", requeue="2"))
    assert s.status == "unknown" and "--requeue was asked" in evidence(s)
    plain = slurm_state(line(KILLED_ATTEMPT, "", source="", requeue="0"))
    assert plain.status == "failed" and plain.exit_code == 143, "without --requeue the exit file is the end"


def test_slurms_end_after_a_stopped_requeue_attempt_is_the_runs_not_the_attempts_143() -> None:
    # Captured on the test cluster: requeued, started again within the same second, and killed by
    # slurmctld ("Killing non-startable batch JobId=60: Job credential revoked", WEXITSTATUS 1).
    s = slurm_state(line(KILLED_ATTEMPT, "FAILED||1:0", source="jobcomp", requeue="2"))
    assert s.status == "failed" and s.exit_code == 1 and "Slurm then ended the job" in evidence(s)
    gone = slurm_state(line(KILLED_ATTEMPT, "CANCELLED by 0||0:15", source="jobcomp", requeue="2"))
    assert gone.status == "cancelled" and "uid 0" in evidence(gone)
