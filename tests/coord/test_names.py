"""Job namespaces: deterministic within a job and node, distinct everywhere else."""

from __future__ import annotations

import re
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streaming.coord.names import MAX_SUFFIX, Namespace, job_identity, node_rank

TORCHRUN = {"MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500", "TORCHELASTIC_RUN_ID": "abc",
            "GROUP_RANK": "0", "RANK": "1", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "4"}


def fresh(dirs, env, salt=None):
    """The first namespace of a key in this process (a new salt gives a new key)."""
    return Namespace.for_job(dirs, env=env, salt=salt or uuid.uuid4().hex)


def test_different_local_dirs_never_collide(tmp_path):
    salt = uuid.uuid4().hex
    a = fresh([tmp_path / "a"], TORCHRUN, salt)
    b = fresh([tmp_path / "b"], TORCHRUN, salt)
    assert a != b


def test_same_dirs_different_job_never_collide(tmp_path):
    salt = uuid.uuid4().hex
    dirs = [tmp_path / "cache"]
    base = fresh(dirs, TORCHRUN, salt)
    other_port = fresh(dirs, {**TORCHRUN, "MASTER_PORT": "29501"}, salt)
    other_node = fresh(dirs, {**TORCHRUN, "GROUP_RANK": "1"}, salt)
    other_run = fresh(dirs, {**TORCHRUN, "TORCHELASTIC_RUN_ID": "xyz"}, salt)
    assert len({base, other_port, other_node, other_run}) == 4


def test_dir_order_and_spelling_do_not_matter(tmp_path):
    job = job_identity(TORCHRUN)
    a = Namespace.derive([tmp_path / "x", tmp_path / "y"], job=job, salt="", instance="1")
    b = Namespace.derive([str(tmp_path / "y" / ".." / "y"), tmp_path / "x", tmp_path / "y"],
                         job=job, salt="", instance="1")
    c = Namespace.derive([tmp_path / "x", tmp_path / "y"], job=job, salt="", instance="2")
    d = Namespace.derive([tmp_path / "x", tmp_path / "y"], job=job, salt="cfg", instance="1")
    assert a == b
    assert len({a, c, d}) == 3


def test_reopening_same_dirs_in_one_process_gets_new_namespace(tmp_path):
    salt = uuid.uuid4().hex
    first = Namespace.for_job([tmp_path], env=TORCHRUN, salt=salt)
    second = Namespace.for_job([tmp_path], env=TORCHRUN, salt=salt)
    assert first != second


def test_without_launcher_every_instance_is_unique(tmp_path):
    assert job_identity({}) is None
    assert fresh([tmp_path], {}, "s") != fresh([tmp_path], {}, "s")


def test_job_identity_sources():
    assert job_identity({"SLURM_JOB_ID": "7", "SLURM_NODEID": "3"}).endswith("node=3")
    assert "MASTER_PORT=29500" in job_identity(TORCHRUN)
    assert job_identity({"RANK": "3"}) is None  # a rank alone does not identify a job
    assert node_rank({"RANK": "5", "LOCAL_WORLD_SIZE": "4"}) == "1"
    assert node_rank({"NODE_RANK": "2", "RANK": "0", "LOCAL_WORLD_SIZE": "1"}) == "2"
    assert node_rank({}) is None


def test_two_simulated_nodes_on_one_host_differ(tmp_path):
    salt = uuid.uuid4().hex
    env = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500", "LOCAL_WORLD_SIZE": "2"}
    node0 = fresh([tmp_path], {**env, "RANK": "1"}, salt)
    node1 = fresh([tmp_path], {**env, "RANK": "2"}, salt)
    assert node0 != node1


@given(
    dirs=st.lists(st.text(min_size=1, max_size=30), min_size=1, max_size=4),
    port=st.integers(1, 65535),
    suffix=st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789.", min_size=1,
                   max_size=MAX_SUFFIX),
)
def test_names_are_short_and_portable(dirs, port, suffix):
    ns = Namespace.for_job(dirs, env={"MASTER_PORT": str(port)})
    name = ns.name(suffix)
    assert len(name) <= 31
    assert re.fullmatch(r"sds_[0-9a-f]{12}_[a-z0-9.]+", name)


def test_suffix_too_long_is_refused():
    with pytest.raises(ValueError, match="suffix"):
        fresh(["/tmp/x"], {}).name("x" * (MAX_SUFFIX + 1))
