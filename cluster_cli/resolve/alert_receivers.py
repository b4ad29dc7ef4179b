"""Where Alertmanager sends the alerts (monitoring.receivers): only with Alertmanager on a monitoring
host, at least one receiver, webhook URL files that are private and hold a URL, and a mail relay and
sender for e-mail."""

from __future__ import annotations

from pathlib import Path

from cluster_cli.errors import Location
from cluster_cli.model import Inventory
from cluster_cli.resolve.problems import Problems
from cluster_cli.site_files import SiteFileError, read_webhook_url


def check_alert_receivers(inventory: Inventory, problems: Problems) -> None:
    monitoring = inventory.monitoring
    receivers = monitoring.receivers
    if receivers is None:
        return
    at: Location = ("monitoring", "receivers")
    if monitoring.host is None or not monitoring.alertmanager:
        problems.add(at, "Alertmanager delivers the alerts to the receivers: set monitoring.host and alertmanager: true")
    if not receivers.webhook_url_files and not receivers.email:
        problems.add(at, "names no receiver: give webhook_url_files or email")
    for index, name in enumerate(receivers.webhook_url_files):
        try:
            read_webhook_url(Path(name).expanduser())
        except SiteFileError as error:
            problems.add(at + ("webhook_url_files", index), str(error))
    if receivers.email and (receivers.smtp_smarthost is None or receivers.smtp_from is None):
        problems.add(at + ("email",), "mail goes through the site's relay: set smtp_smarthost (HOST:PORT) and smtp_from")
