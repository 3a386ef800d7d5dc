"""Rebuild the TweetEval samples the learning bench reads, from ``../shared/data``.

Each task's released splits are pooled (a user's own CSV is split at random, not by its
authors' splits) and a seeded sample of at most ``ROWS`` rows is written as JSON lines
``{"text": ..., "label": ...}``, labels by name. The bench never reads ``../shared``.

Run: .venv/bin/python bench/data/make_tweeteval.py
"""

from __future__ import annotations

import json
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent
SHARED = HERE.parent.parent.parent / "shared" / "data"
ROWS = 600
#: (folder, splits, kept label ids or None for all, label names by id or None for mapping.txt)
TASKS = {
    "sentiment": ("tweeteval-sentiment", ("val", "test"), None, None),
    "offensive": ("tweeteval-offensive", ("val", "test"), None, None),
    "stance_abortion": ("tweeteval-stance-abortion", ("train", "val", "test"), None, None),
    # five emojis of five different meanings (love, laughter, hype, country, holiday): the
    # three commonest are near-synonyms (red heart, heart eyes, two hearts) no reader tells apart
    "emoji": (
        "tweeteval-emoji",
        ("val", "test"),
        (0, 2, 4, 11, 17),
        {0: "red heart", 2: "tears of joy", 4: "fire", 11: "United States", 17: "Christmas tree"},
    ),
}


def main() -> None:
    for name, (folder, splits, kept, names) in TASKS.items():
        root = SHARED / folder
        if names is None:
            names = {
                int(line.split("\t")[0]): line.split("\t")[1].strip()
                for line in (root / "mapping.txt").read_text(encoding="utf-8").splitlines()
            }
        rows = []
        for split in splits:
            texts = (root / f"{split}_text.txt").read_text(encoding="utf-8").splitlines()
            labels = (root / f"{split}_labels.txt").read_text(encoding="utf-8").split()
            for text, label in zip(texts, labels, strict=True):
                if kept is None or int(label) in kept:
                    rows.append({"text": text.strip(), "label": names[int(label)]})
        random.Random(name).shuffle(rows)
        out = HERE / f"tweeteval_{name}.jsonl"
        with out.open("w", encoding="utf-8") as handle:
            for row in rows[:ROWS]:
                handle.write(json.dumps(row, ensure_ascii=False) + "\n")
        print(f"{out.name}: {min(len(rows), ROWS)} of {len(rows)} rows")


if __name__ == "__main__":
    main()
