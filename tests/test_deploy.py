"""configs/deploy/: the Dockerfile and the Kubernetes example agree with the code they run.

No docker or kubectl runs here (and no image can be pulled), so each claim the files make is
checked against toolnexus itself: the paths it serves, its CLI parser, the environment
variables it reads, the extras pyproject.toml declares, and the ConfigMap's manifest, which
loads and builds. kubeconform is not run: it downloads the Kubernetes JSON schemas when it runs.
"""

from __future__ import annotations

import json
import re
import shlex
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

import toolnexus
from toolnexus import create_toolkit, load_manifest
from toolnexus.cli import _parser
from toolnexus.serve import HEALTH_PATH, METRICS_PATH

REPO = Path(toolnexus.__file__).resolve().parents[1]
DEPLOY = REPO / "configs" / "deploy"


def documents() -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((DEPLOY / "kubernetes.yaml").read_text()) if d]


def one(kind: str, name: str) -> dict[str, Any]:
    (found,) = [d for d in documents() if d["kind"] == kind and d["metadata"]["name"] == name]
    return found


def container() -> dict[str, Any]:
    (main,) = one("Deployment", "toolnexus")["spec"]["template"]["spec"]["containers"]
    return main


def dockerfile() -> str:
    # one logical line per instruction
    return (DEPLOY / "Dockerfile").read_text().replace("\\\n", " ")


def instruction(name: str) -> list[str]:
    return [m.group(1).strip() for m in re.finditer(rf"^{name} (.+)$", dockerfile(), re.M)]


def http_port(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    assert args.command == "serve"
    return int(args.http.rpartition(":")[2])


def test_every_kind_of_the_example_is_there() -> None:
    kinds = sorted((d["kind"], d["metadata"]["name"]) for d in documents())
    assert kinds == [
        ("ConfigMap", "toolnexus-manifest"),
        ("Deployment", "redis"),
        ("Deployment", "toolnexus"),
        ("Secret", "toolnexus"),
        ("Service", "redis"),
        ("Service", "toolnexus"),
    ]
    assert one("Deployment", "toolnexus")["spec"]["replicas"] == 2


def test_probes_port_and_arguments_match_the_server() -> None:
    main = container()
    assert main["args"][0] == "toolnexus"
    args = _parser().parse_args(main["args"][1:])
    port = http_port(main["args"][1:])
    (declared,) = main["ports"]
    assert declared["containerPort"] == port
    for probe in ("readinessProbe", "livenessProbe"):
        assert main[probe]["httpGet"]["path"] == HEALTH_PATH
        assert main[probe]["httpGet"]["port"] in (port, declared["name"])
    # the pod outlives the drain: SIGKILL comes only after terminationGracePeriodSeconds
    spec = one("Deployment", "toolnexus")["spec"]["template"]["spec"]
    assert spec["terminationGracePeriodSeconds"] > args.grace
    assert args.watch  # the ConfigMap's updates reload


def test_the_prometheus_annotations_scrape_metrics_without_a_token() -> None:
    annotations = one("Deployment", "toolnexus")["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true"
    assert annotations["prometheus.io/path"] == METRICS_PATH
    main = container()
    assert int(annotations["prometheus.io/port"]) == main["ports"][0]["containerPort"]
    # the scraper sends no token, so /metrics must be public
    assert _parser().parse_args(main["args"][1:]).metrics_public


def test_the_configmap_manifest_is_mounted_where_serve_reads_it_and_builds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    main = container()
    (mount,) = main["volumeMounts"]
    spec = one("Deployment", "toolnexus")["spec"]["template"]["spec"]
    (volume,) = [v for v in spec["volumes"] if v["name"] == mount["name"]]
    data = one("ConfigMap", volume["configMap"]["name"])["data"]
    served = Path(_parser().parse_args(main["args"][1:]).file)
    assert served.parent == Path(mount["mountPath"])
    assert served.name in data
    manifest = tmp_path / served.name
    manifest.write_text(data[served.name])
    monkeypatch.delenv("TOOLNEXUS_STATE_URL", raising=False)  # in process here, Redis there
    assert load_manifest(manifest).name == "team-tools"
    with create_toolkit(manifest) as toolkit:
        assert sorted(t.name for t in toolkit.tools()) == ["disk_usage", "greet"]


def test_every_environment_variable_is_one_toolnexus_reads() -> None:
    source = "\n".join(p.read_text() for p in (REPO / "toolnexus").rglob("*.py"))
    main = container()
    names = [variable["name"] for variable in main["env"]]
    assert names
    for name in names:
        assert f'"{name}"' in source, f"toolnexus never reads {name}"
    secret = one("Secret", "toolnexus")["stringData"]
    for variable in main["env"]:
        ref = variable.get("valueFrom", {}).get("secretKeyRef")
        if ref is not None:
            assert ref["name"] == "toolnexus" and ref["key"] in secret
            assert "PLACEHOLDER" in _line_of(f"{ref['key']}:")  # marked as such
    assert len(secret["approval-secret"].encode()) >= 32  # the length the server accepts


def _line_of(text: str) -> str:
    (line,) = [x for x in (DEPLOY / "kubernetes.yaml").read_text().splitlines() if text in x]
    return line


def test_services_select_their_pods_and_the_state_url_names_the_redis_service() -> None:
    for name in ("toolnexus", "redis"):
        labels = one("Deployment", name)["spec"]["template"]["metadata"]["labels"]
        selector = one("Service", name)["spec"]["selector"]
        assert selector.items() <= labels.items()
    env = {v["name"]: v.get("value") for v in container()["env"]}
    url = env["TOOLNEXUS_STATE_URL"]
    assert url is not None
    match = re.fullmatch(r"redis://([a-z-]+):(\d+)/\d+", url)
    assert match is not None
    (port,) = one("Service", match.group(1))["spec"]["ports"]
    assert port["port"] == int(match.group(2))


def test_dockerfile_cmd_parses_with_the_cli_and_matches_expose_and_healthcheck() -> None:
    (base,) = instruction("FROM")
    assert base == "python:3.11-slim"
    (cmd,) = instruction("CMD")
    argv = json.loads(cmd)
    assert argv[0] == "toolnexus"
    port = http_port(argv[1:])
    assert instruction("EXPOSE") == [str(port)]
    (health,) = instruction("HEALTHCHECK")
    assert f"127.0.0.1:{port}{HEALTH_PATH}" in health
    # the same command as the Kubernetes example, which adds --metrics-public
    assert container()["args"][: len(argv)] == argv
    (user,) = instruction("USER")
    assert user != "root"


def test_dockerfile_installs_the_system_tools_and_extras_that_exist() -> None:
    runs = " ".join(instruction("RUN"))
    packages = set(shlex.split(runs.partition("apt-get install")[2].partition("&&")[0]))
    assert {"bubblewrap", "ripgrep", "git"} <= packages
    (extras_text,) = re.findall(r'pip install [^"]*"/src\[([^\]]+)\]"', runs)
    extras = set(extras_text.split(","))
    assert extras == {"builtin", "redis", "metrics"}
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert extras <= pyproject["project"]["optional-dependencies"].keys()
