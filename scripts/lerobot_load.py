"""Load an r3 LeRobot export with LeRobot itself and check it against its own meta/info.json.

Runs in the LeRobot environment (Python >= 3.12, ``lerobot[dataset]``), not in r3's: see
docs/datasets.md. It reads the dataset as a policy would (one frame with an action chunk of
``--chunk`` steps), checks frame, episode, task and fps counts and that ``stats.json`` has every
feature with the quantiles, then prints one JSON line with what it found; exit 1 on a mismatch.

    python scripts/lerobot_load.py data/lerobot/r3_pusher --chunk 20
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

QUANTILES = ("q01", "q10", "q50", "q90", "q99")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("root", help="the export's folder (meta/, data/, videos/)")
    p.add_argument(
        "--repo-id", default="r3/export", help="any name: the dataset is read from ROOT, never the Hub"
    )
    p.add_argument("--chunk", type=int, default=20, help="action steps per sample, as ACT's chunk_size")
    p.add_argument("--video-backend", default="pyav", help="pyav (no FFmpeg libraries needed) or torchcodec")
    args = p.parse_args()

    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    info = json.loads((Path(args.root) / "meta" / "info.json").read_text())
    chunk = {"action": [i / info["fps"] for i in range(args.chunk)]}
    ds = LeRobotDataset(
        args.repo_id, root=args.root, delta_timestamps=chunk, video_backend=args.video_backend
    )
    item = ds[0]
    found = {
        "frames": len(ds),
        "episodes": ds.num_episodes,
        "tasks": ds.meta.total_tasks,
        "fps": ds.fps,
        "image": list(item["observation.images.top"].shape),
        "action": list(item["action"].shape),
        "task": item["task"],
        "stats_features": sorted(ds.meta.stats),
        "stats_with_quantiles": sorted(k for k, s in ds.meta.stats.items() if all(q in s for q in QUANTILES)),
    }
    expected = {
        "frames": info["total_frames"],
        "episodes": info["total_episodes"],
        "tasks": info["total_tasks"],
        "fps": info["fps"],
        "image": [3, *info["features"]["observation.images.top"]["shape"][:2]],
        "action": [args.chunk, 2],
        "stats_features": sorted(info["features"]),
        "stats_with_quantiles": sorted(info["features"]),
    }
    wrong = {k: (found[k], v) for k, v in expected.items() if found[k] != v}
    print(json.dumps({**found, "wrong": wrong}))
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
