"""docker/monitoring.yml (Prometheus + Grafana with the dashboard) fits together: every file it
mounts exists, Prometheus scrapes the job's metrics port, Grafana's data source is the
Prometheus the compose file serves, and the dashboard is mounted where its provider looks."""

from __future__ import annotations

import json
from pathlib import Path

try:
    import tomllib
except ImportError:            # Python 3.10
    import tomli as tomllib

import yaml

ROOT = Path(__file__).resolve().parent.parent.parent
COMPOSE = ROOT / "docker" / "monitoring.yml"


def _services() -> dict:
    return yaml.safe_load(COMPOSE.read_text())["services"]


def _mounts(service: dict) -> dict[str, Path]:
    """container path -> host file of each volume."""
    out = {}
    for v in service["volumes"]:
        host, container = v.split(":")[:2]
        out[container] = (COMPOSE.parent / host).resolve()
    return out


def test_every_mounted_file_exists():
    for name, service in _services().items():
        for container, host in _mounts(service).items():
            assert host.is_file(), f"{name}: {host} (mounted at {container}) is missing"


def test_prometheus_scrapes_the_jobs_metrics_port():
    prom = _services()["prometheus"]
    config = yaml.safe_load(_mounts(prom)["/etc/prometheus/prometheus.yml"].read_text())
    targets = [t for sc in config["scrape_configs"] for s in sc["static_configs"]
               for t in s["targets"]]
    job = tomllib.loads((ROOT / "streaming" / "apps" / "job.example.toml").read_text())
    assert targets == [f"127.0.0.1:{job['metrics']['port']}"]
    # the job serves on loopback only: Prometheus must share the host's network
    assert prom["network_mode"] == "host"


def test_grafana_reads_that_prometheus_and_the_dashboard():
    services = _services()
    listen = next(a for a in services["prometheus"]["command"] if a.startswith("--web.listen"))
    grafana = _mounts(services["grafana"])
    source = yaml.safe_load(
        grafana["/etc/grafana/provisioning/datasources/binlog-cdc.yml"].read_text())
    [ds] = source["datasources"]
    assert ds["type"] == "prometheus" and ds["url"] == "http://" + listen.split("=", 1)[1]
    provider = yaml.safe_load(
        grafana["/etc/grafana/provisioning/dashboards/binlog-cdc.yml"].read_text())
    folder = provider["providers"][0]["options"]["path"]
    [dashboard] = [c for c in grafana if c.startswith(folder + "/")]
    assert grafana[dashboard] == (ROOT / "conf" / "grafana-dashboard.json").resolve()
    panels = json.loads(grafana[dashboard].read_text())["panels"]
    assert {p["datasource"]["type"] for p in panels} == {ds["type"]}
