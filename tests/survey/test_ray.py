"""A fleet on Ray: a local cluster of two nodes (each a raylet with its worker processes), each with its own
resource, and a plan whose two variants are routed one to each; the two
environments compute the sum in different orders and the store shows it."""
import pytest

from survey_plans import fake_plan
from fpspec.survey import Store, parse_plan_text, run_survey
from fpspec.survey.report import build_rows

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'fpspec[fleet]')")


@pytest.fixture
def cluster():
    from ray.cluster_utils import Cluster

    why = None
    for _ in range(3):      # a raylet gets 30 s to register: a loaded machine can miss that once
        try:
            c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "resources": {"node_a": 1},
                                                               "include_dashboard": False})
            c.add_node(num_cpus=1, resources={"node_b": 1})
            c.wait_for_nodes()
            break
        except Exception as e:   # no shared memory, no free ports, ...: say why
            why = e
            ray.shutdown()
    else:
        pytest.skip(f"a local Ray cluster cannot start here: {why}")
    yield c
    ray.shutdown()
    c.shutdown()


def test_variants_run_on_the_workers_that_have_their_resources(tmp_path, fake_target, cluster):
    text = fake_plan(fake_target, seq_resources='resources = { node_a = 1 }', rev_resources='resources = { node_b = 1 }')
    plan = parse_plan_text(text)
    with Store(tmp_path / "fleet.db") as store:
        summary = run_survey(plan, store, cluster=cluster.address)
        assert (summary.ran, summary.failed) == (8, 0)
        results = store.results()
        # each environment ran on the node that has its variant's resource
        node_of = {n["NodeID"]: n["Resources"] for n in ray.nodes() if n["Alive"]}
        envs = store.environments()
        assert len(envs) == 2
        for e in envs:
            wanted = "node_a" if e.info["env"]["FAKE_ORDER"] == "seq" else "node_b"
            assert wanted in node_of[e.info["node"]]
        rows = build_rows(results)
        assert [row.classes for row in rows] == [2, 2, 2, 2]
        again = run_survey(plan, store, cluster=cluster.address)
        assert (again.ran, again.skipped) == (0, 8)
