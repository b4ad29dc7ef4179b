"""The variables cluster-cli generates are exactly ones the roles declare: no silent drift."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from unit_helpers import BASE, edit, load

from cluster_cli.ansible.variables import cluster_variables, conf_server, secret_variables
from cluster_cli.loader import load_cluster
from cluster_cli.secrets_store import ensure_secrets

REPO = Path(__file__).resolve().parents[2]
INVENTORIES = sorted((REPO / "inventories").rglob("*.yaml"))


def declared_role_variables() -> dict[str, set[str]]:
    declared: dict[str, set[str]] = {}
    for spec in sorted(REPO.glob("roles/*/meta/argument_specs.yml")):
        document = yaml.safe_load(spec.read_text())
        options = document["argument_specs"]["main"].get("options", {})
        declared[spec.parents[1].name] = set(options)
    return declared


def test_every_role_has_argument_specs_in_step_with_defaults() -> None:
    for defaults in sorted(REPO.glob("roles/*/defaults/main.yml")):
        role = defaults.parents[1].name
        names = set(yaml.safe_load(defaults.read_text()) or {})
        spec = declared_role_variables().get(role)
        assert spec is not None, f"roles/{role} has no meta/argument_specs.yml"
        assert names <= spec, f"roles/{role}: defaults not in argument_specs: {sorted(names - spec)}"


@pytest.mark.parametrize("inventory", INVENTORIES, ids=lambda path: path.name)
def test_generated_variables_are_declared_by_a_role(inventory: Path, tmp_path: Path) -> None:
    cluster = load_cluster(inventory)
    secrets = ensure_secrets(tmp_path / "secrets")
    generated = cluster_variables(cluster, tmp_path / "build", secrets) | secret_variables(cluster, secrets)
    declared = set().union(*declared_role_variables().values())
    unknown = sorted(set(generated) - declared)
    assert not unknown, f"no role declares {unknown}"


def test_secret_file_carries_only_the_password(tmp_path: Path) -> None:
    cluster = load_cluster(REPO / "inventories" / "local" / "inventory.yaml")
    secrets = ensure_secrets(tmp_path / "secrets")
    assert secret_variables(cluster, secrets) == {"slurmdbd_storage_pass": secrets.db_password()}
    assert secrets.db_password() not in yaml.safe_dump(cluster_variables(cluster, tmp_path, secrets))


def test_configless_gives_slurmd_both_controllers_and_the_port(tmp_path: Path) -> None:
    secrets = ensure_secrets(tmp_path / "secrets")
    on = cluster_variables(load_cluster(REPO / "inventories/examples/gpu-cluster.yaml"), tmp_path, secrets)
    assert (on["slurm_common_configless"], on["slurmd_conf_server"]) == (True, "10.10.0.11:6817,10.10.0.12:6817")
    off = cluster_variables(load_cluster(REPO / "inventories/examples/minimal.yaml"), tmp_path, secrets)
    assert (off["slurm_common_configless"], off["slurmd_conf_server"]) == (False, "")


def test_conf_server_names_the_primary_then_the_backup_at_the_controllers_port() -> None:
    configless = BASE + "slurm:\n  configless: true\n"
    with_backup = edit(configless, "  primary: head\n", "  primary: head\n  backup: box\n  port: 7817\n")
    assert conf_server(load(with_backup)) == "10.0.0.1:7817,10.0.0.2:7817"
    assert conf_server(load(configless)) == "10.0.0.1:6817"
    assert conf_server(load(BASE)) == ""
