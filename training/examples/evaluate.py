"""Evaluate the weights train.py saved (--save) on points the training never saw.

    python evaluate.py model.pt [--out eval.json]

chain.sh runs it as the second job of a chain, once the training job has ended well.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from train import make_data, make_model  # this directory's train.py: the same data and model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("weights", type=Path)
    parser.add_argument("--samples", type=int, default=5000)
    parser.add_argument("--out", type=Path, help="write the result here as JSON")
    args = parser.parse_args()

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    saved = torch.load(args.weights, map_location=device)
    model = make_model(saved["hidden"]).to(device)
    model.load_state_dict(saved["weights"])
    inputs, labels = make_data(seed=4242, samples=args.samples)
    with torch.no_grad():
        predicted = model(inputs.to(device)).argmax(dim=1).cpu()
    accuracy = float((predicted == labels).float().mean())
    print(f"accuracy {accuracy:.4f} on {args.samples} held-out points ({args.weights})")
    if args.out:
        args.out.write_text(json.dumps({"accuracy": accuracy, "samples": args.samples}) + "\n")


if __name__ == "__main__":
    main()
