"""The test sessions' ROS domain claims (test/ros_domains.py): a held domain is no other process's."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from ros_domains import LOCK_DIR, REST_S, DomainClaim

TEST_DIR = Path(__file__).resolve().parents[1]


def _claim_in_a_child(ids: range, lock_dir: Path = LOCK_DIR) -> subprocess.CompletedProcess:
    code = (
        "from pathlib import Path; from ros_domains import DomainClaim; "
        f"print(DomainClaim(range({ids.start}, {ids.stop}), Path({str(lock_dir)!r})).domain)"
    )
    return subprocess.run(
        [sys.executable, "-c", code],
        env=dict(os.environ, PYTHONPATH=str(TEST_DIR)),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_session_domain_and_a_test_claim_are_refused_to_other_processes():
    session = int(os.environ["ROS_DOMAIN_ID"])
    claim = DomainClaim()
    try:
        assert claim.domain != session
        for domain in (session, claim.domain):
            child = _claim_in_a_child(range(domain, domain + 1))
            assert child.returncode != 0 and "is held by another process" in child.stderr, child.stdout
    finally:
        claim.release()


def test_a_released_domain_rests_before_its_next_claim(tmp_path):
    """A killed process's DDS participant outlives it by its lease: the next claim of a domain just
    released would meet the last holder's servers. The claims here use a lock folder of their own:
    a domain of the shared folder marked as rested is free to every test process of the session, and
    in a CI run another one took it between the two claims."""
    claim = DomainClaim(lock_dir=tmp_path)
    domain = claim.domain
    claim.release()
    only_that_one = range(domain, domain + 1)
    child = _claim_in_a_child(only_that_one, tmp_path)
    assert child.returncode != 0 and "rests after a release" in child.stderr, child.stdout
    (tmp_path / f"{domain}.lock").write_text(f"{time.time() - REST_S - 1:.3f}\n")  # rested long enough
    child = _claim_in_a_child(only_that_one, tmp_path)
    assert child.returncode == 0 and child.stdout.strip() == str(domain), child.stderr
