"""Rebuild the shipped TweetEval sample from ../shared/data (run once by hand).

    .venv/bin/python datasets/builtin/make_samples.py /work/shared/data

The output is committed; the app never reads ../shared at run time. The demo dataset
(demo/data.jsonl) is hand-written; the GSM8K built-in reads the engine's shipped sample
(training/engine/datasets/data/gsm8k/train.jsonl), so neither is generated here.
"""

import html
import json
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
TWEETEVAL_ROWS = 300
# TweetEval's text files keep some characters as literal escapes ("don\\u2019t") and HTML
# entities ("&amp;"), artefacts of how the tweets were collected; users should see the text.
_LITERAL_ESCAPE = re.compile(r"\\u([0-9a-fA-F]{4})")


def clean_tweet(text: str) -> str:
    text = _LITERAL_ESCAPE.sub(lambda match: chr(int(match.group(1), 16)), text)
    return html.unescape(text).strip()


def tweeteval(source: Path) -> None:
    """First rows of the validation split, label ids replaced by names from mapping.txt."""
    folder = source / "tweeteval-sentiment"
    names = {}
    for line in (folder / "mapping.txt").read_text(encoding="utf-8").splitlines():
        if line.strip():
            number, name = line.split("\t")
            names[number.strip()] = name.strip()
    texts = (folder / "val_text.txt").read_text(encoding="utf-8").splitlines()
    labels = (folder / "val_labels.txt").read_text(encoding="utf-8").splitlines()
    out = HERE / "tweeteval_sentiment"
    out.mkdir(exist_ok=True)
    with open(out / "data.jsonl", "w", encoding="utf-8") as target:
        for text, label in list(zip(texts, labels, strict=True))[:TWEETEVAL_ROWS]:
            record = {"text": clean_tweet(text), "label": names[label.strip()]}
            target.write(json.dumps(record, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    root = Path(sys.argv[1] if len(sys.argv) > 1 else HERE.parents[2] / "shared" / "data")
    tweeteval(root)
