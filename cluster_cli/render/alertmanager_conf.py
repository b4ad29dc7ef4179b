"""Alertmanager's configuration (monitoring.receivers), rendered once on the control node: every
alert to every receiver, grouped by alert name and cluster. The webhook URLs are credentials read
from the site's private files (site_files), so the file is a secret: 0600 in the build directory,
root:prometheus 0640 on the monitoring host (roles/prometheus, never shown)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cluster_cli.cluster import Cluster
from cluster_cli.model import AlertReceivers
from cluster_cli.render.common import json_text
from cluster_cli.site_files import read_webhook_url

ALERTMANAGER_CONFIG = "monitoring/alertmanager.yml"
RECEIVER = "cluster-cli"
# Alertmanager's own default, written out: a changed group is sent again after it.
GROUP_INTERVAL = "5m"


def alertmanager_config(cluster: Cluster, receivers: AlertReceivers) -> dict[str, Any]:
    receiver: dict[str, Any] = {"name": RECEIVER}
    if receivers.webhook_url_files:
        receiver["webhook_configs"] = [{"url": read_webhook_url(Path(name).expanduser()), "send_resolved": True}
                                       for name in receivers.webhook_url_files]
    if receivers.email:
        receiver["email_configs"] = [{"to": address, "send_resolved": True} for address in receivers.email]
    config: dict[str, Any] = {
        "route": {"receiver": RECEIVER, "group_by": ["alertname", "cluster"], "group_wait": receivers.group_wait,
                  "group_interval": GROUP_INTERVAL, "repeat_interval": receivers.repeat_interval},
        "receivers": [receiver],
    }
    if receivers.email:
        config["global"] = {"smtp_smarthost": receivers.smtp_smarthost, "smtp_from": receivers.smtp_from,
                            "smtp_require_tls": receivers.smtp_require_tls}
    return config


def render_alertmanager_conf(cluster: Cluster) -> str | None:
    """The file's text (JSON, which Alertmanager reads as the YAML it is); None without receivers."""
    monitoring = cluster.inventory.monitoring
    if monitoring.receivers is None or not monitoring.alertmanager:
        return None
    return json_text(alertmanager_config(cluster, monitoring.receivers)) + "\n"
