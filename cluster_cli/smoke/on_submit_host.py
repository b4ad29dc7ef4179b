"""Entry point of a smoke run on a remote submit host (a login node or the controller).

``cluster-cli smoke`` copies this package and ``training/`` to the submit host and runs
``python3 -m cluster_cli.smoke.on_submit_host TARGET.json [CHECK ...]`` there (TARGET.json: one
``SmokeTarget.summary()``, or a list of them, one per partition and node group); only the standard
library is needed. Progress and the report come back as JSON lines on stdout:
``{"event": "start"|"finish", ...}``, then ``{"event": "report", "report": {...}}`` or
``{"event": "error", "message": "..."}``.
"""

from __future__ import annotations

import json
import sys
from dataclasses import fields
from pathlib import Path
from typing import Any

from cluster_cli.smoke.suite import SmokeEvent, run_smoke
from cluster_cli.smoke.suite_errors import SmokeSetupError, UnknownCheckError
from cluster_cli.smoke.target import SmokeTarget

EXIT_SETUP_ERROR = 3


def target_from_dict(data: dict[str, Any], training_dir: Path) -> SmokeTarget:
    """A target from ``SmokeTarget.summary()``; ``training_dir`` is where the copy landed."""
    known = {item.name for item in fields(SmokeTarget)}
    values = {key: value for key, value in data.items() if key in known}
    values["training_dir"] = training_dir
    return SmokeTarget(**values)


def _emit(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def _progress(event: SmokeEvent) -> None:
    _emit({
        "event": event.kind,
        "check": event.check,
        "index": event.index,
        "total": event.total,
        "result": event.result.to_dict() if event.result else None,
        "scope": event.scope,
    })


def main(argv: list[str]) -> int:
    target_file = Path(argv[0])
    only = argv[1:] or None
    data = json.loads(target_file.read_text())
    training = target_file.parent / "training"
    if isinstance(data, list):
        target: SmokeTarget | list[SmokeTarget] = [target_from_dict(each, training) for each in data]
    else:
        target = target_from_dict(data, training)
    try:
        report = run_smoke(target, only, _progress)
    except (SmokeSetupError, UnknownCheckError) as error:
        _emit({"event": "error", "message": str(error)})
        return EXIT_SETUP_ERROR
    _emit({"event": "report", "report": report.to_dict()})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
