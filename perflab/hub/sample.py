"""perflab's ShareGPT-format sample: a few hundred generated conversations shipped with the app.

It stands in for the ShareGPT dump when the hub cannot be reached, so the demo (and CI, which has no
network) still runs ShareGPT profiles. It is made here, deterministically, from a fixed seed: it has
the dump's shape (a JSON array of ``{"id", "conversations": [{"from": "human"|"gpt", "value"}]}``)
and a spread of prompt and reply lengths like ShareGPT's (short questions, longer answers, some
multi-turn chats), but its text is synthetic. Results measured with it are labelled "sample"
wherever they are shown; they are not comparable with results on the real dump.

``python -m perflab.hub.sample`` rewrites the shipped file; a test checks that the file is what this
module generates.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import Any

SAMPLE_NAME = "sharegpt-format-sample-perflab.json"
SAMPLE_PATH = Path(__file__).with_name(SAMPLE_NAME)
SAMPLE_CONVERSATIONS = 300
SAMPLE_SEED = 20240613

_TOPICS = (
    "batching in inference servers",
    "the KV cache",
    "tensor parallelism",
    "a Python decorator",
    "SQL window functions",
    "a sourdough starter",
    "the French revolution",
    "photosynthesis",
    "a job interview",
    "unit tests for a parser",
    "a hiking trip in the Alps",
    "compound interest",
    "the TCP handshake",
    "a birthday poem",
    "Rust lifetimes",
    "a marketing email",
    "quantum tunnelling",
    "a vegetarian lasagna",
    "garbage collection",
    "the rules of chess",
    "a cover letter",
    "binary search",
    "climate models",
    "a short story about a lighthouse",
    "Kubernetes pods",
)
_ASKS = (
    "Can you explain {topic} in simple terms?",
    "Write a short summary of {topic}.",
    "What are the most common mistakes people make with {topic}?",
    "I am preparing a talk about {topic}. Give me an outline.",
    "Compare two approaches to {topic} and say which you would pick.",
    "Help me debug my understanding of {topic}: {detail}",
    "Translate this note about {topic} into plain English: {detail}",
)
_TEXT = (
    "the system keeps a small buffer so that requests arriving together share one pass while the "
    "queue drains slowly at first and then faster once the cache is warm and every step reuses what "
    "the previous one computed which is why measurements taken in the first seconds often mislead "
    "careful readers who compare numbers across runs with different settings and different loads "
    "because latency and throughput trade against each other as the batch grows and memory fills"
)
_WORDS = tuple(_TEXT.split(" "))


def _sentence(rng: random.Random, words: int) -> str:
    start = rng.randrange(len(_WORDS))
    text = " ".join(_WORDS[(start + offset) % len(_WORDS)] for offset in range(words))
    return text[0].upper() + text[1:] + "."


def _paragraph(rng: random.Random, words: int) -> str:
    sentences = []
    while words > 0:
        length = min(words, rng.randint(6, 24))
        sentences.append(_sentence(rng, length))
        words -= length
    return " ".join(sentences)


def _prompt(rng: random.Random) -> str:
    topic = rng.choice(_TOPICS)
    detail = _paragraph(rng, int(rng.lognormvariate(3.4, 0.9)) + 4)
    ask = rng.choice(_ASKS)
    text = ask.format(topic=topic, detail=detail)
    if "{detail}" not in ask and rng.random() < 0.4:
        text += " " + detail
    return text


def _reply(rng: random.Random) -> str:
    return _paragraph(rng, min(int(rng.lognormvariate(4.9, 0.7)) + 10, 900))


def build_sample(count: int = SAMPLE_CONVERSATIONS, seed: int = SAMPLE_SEED) -> list[dict[str, Any]]:
    """The sample's conversations (1 to 3 exchanges each), the same for the same count and seed."""
    rng = random.Random(seed)
    conversations = []
    for index in range(count):
        turns = []
        for _ in range(rng.choice((1, 1, 1, 2, 3))):
            turns.append({"from": "human", "value": _prompt(rng)})
            turns.append({"from": "gpt", "value": _reply(rng)})
        conversations.append({"id": f"perflab-sample-{index:04d}", "conversations": turns})
    return conversations


def sample_text() -> str:
    """The shipped file's exact content."""
    return json.dumps(build_sample(), ensure_ascii=False) + "\n"


def main() -> int:
    SAMPLE_PATH.write_text(sample_text(), encoding="utf-8")
    print(f"wrote {SAMPLE_PATH} ({SAMPLE_PATH.stat().st_size} bytes)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
