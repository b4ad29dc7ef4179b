"""The training scripts import their helper as a top-level module (``trainlib``), the way
``torchrun training/<script>.py`` sees it; the tests do the same."""

from __future__ import annotations

import sys
from pathlib import Path

TRAINING_DIR = Path(__file__).resolve().parents[2] / "training"
if str(TRAINING_DIR) not in sys.path:
    sys.path.insert(0, str(TRAINING_DIR))
