"""Token counting for datasets and output tokens: a local tokenizer, or the server's ``/tokenize``.

``load_local_tokenizer(path)`` reads a ``tokenizer.json`` file (or a directory holding one) with the
``tokenizers`` library, or a model directory with ``transformers`` when that is installed; both
libraries are optional. ``ServerTokenizer`` talks to the ``/tokenize`` and ``/detokenize`` endpoints
vLLM and the simulator expose. Both offer ``encode``, ``decode`` and ``filler_ids`` (token ids to pad
a random prompt with). What the server answers is read up to ``MAX_ANSWER_BYTES`` and parsed as JSON
as deep as Python's parser allows; past either bound the server is treated as not tokenizing.
"""

from __future__ import annotations

import http.client
import json
import os
import random
import urllib.parse
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence

from perflab.bench.errors import BenchError
from perflab.bench.serverapi import ServerUnavailable, server_call

# The most of a /tokenize, /detokenize or /v1/models answer read (a 1 M-token prompt is ~8 MiB).
MAX_ANSWER_BYTES = 16 * 1024 * 1024
# The most characters of text whose server token count one ServerTokenizer remembers.
MAX_COUNTED_CHARS = 64 * 1024 * 1024


class AnswerTooLarge(ValueError):
    """A server's answer ran past ``MAX_ANSWER_BYTES``."""


def _read_answer(response: http.client.HTTPResponse) -> bytes:
    """The body of an answer, at most ``MAX_ANSWER_BYTES`` of it (``AnswerTooLarge`` past that)."""
    data = response.read(MAX_ANSWER_BYTES + 1)
    if len(data) > MAX_ANSWER_BYTES:
        raise AnswerTooLarge(f"answer longer than {MAX_ANSWER_BYTES // (1024 * 1024)} MiB")
    return data


FILLER_WORDS = [
    "time",
    "year",
    "people",
    "way",
    "day",
    "man",
    "thing",
    "woman",
    "life",
    "child",
    "world",
    "school",
    "state",
    "family",
    "student",
    "group",
    "country",
    "problem",
    "hand",
    "part",
    "place",
    "case",
    "week",
    "company",
    "system",
    "program",
    "question",
    "work",
    "government",
    "number",
    "night",
    "point",
    "home",
    "water",
    "room",
    "mother",
    "area",
    "money",
    "story",
    "fact",
    "month",
    "lot",
    "right",
    "study",
    "book",
    "eye",
    "job",
    "word",
    "business",
    "issue",
    "side",
    "kind",
    "head",
    "house",
    "service",
    "friend",
    "father",
    "power",
    "hour",
    "game",
    "line",
    "end",
    "member",
    "law",
    "car",
    "city",
    "community",
    "name",
    "president",
    "team",
    "minute",
    "idea",
    "kid",
    "body",
    "information",
    "back",
    "parent",
    "face",
    "others",
    "level",
    "office",
    "door",
    "health",
    "person",
    "art",
    "war",
    "history",
    "party",
    "result",
    "change",
    "morning",
    "reason",
    "research",
    "girl",
    "guy",
    "moment",
    "air",
    "teacher",
    "force",
    "education",
    "foot",
    "boy",
    "age",
    "policy",
    "music",
    "market",
    "sense",
    "nation",
    "plan",
    "college",
    "interest",
    "death",
    "experience",
    "effect",
    "class",
    "control",
    "care",
    "field",
    "development",
    "role",
    "effort",
    "rate",
    "heart",
    "drug",
    "show",
    "leader",
    "light",
    "voice",
    "wife",
    "police",
    "mind",
    "price",
    "report",
    "decision",
    "son",
    "view",
    "relationship",
    "town",
    "road",
    "arm",
    "difference",
    "value",
    "building",
    "action",
    "model",
    "season",
    "society",
    "tax",
    "director",
    "position",
    "player",
    "record",
]


class Tokenizer:
    """What the datasets and the output counter need from a tokenizer."""

    kind = "tokenizer"
    name = ""

    def encode(self, text: str) -> List[int]:
        raise NotImplementedError

    def decode(self, ids: Sequence[int]) -> str:
        raise NotImplementedError

    def count(self, text: str) -> int:
        return len(self.encode(text))

    def filler_ids(self, rng: random.Random, count: int) -> List[int]:
        """About ``count`` token ids of filler text (exactly ``count`` when the vocabulary is known)."""
        return self.encode(" " + " ".join(rng.choice(FILLER_WORDS) for _ in range(count)))[:count]


class LocalTokenizer(Tokenizer):
    """A tokenizer loaded in this process (``tokenizers`` or ``transformers``)."""

    def __init__(self, name: str, backend: Any, library: str) -> None:
        self.name = name
        self._backend = backend
        self._library = library
        if library == "tokenizers":
            special = set(backend.get_added_tokens_decoder())
            size = backend.get_vocab_size()
            texts = backend.decode_batch([[token_id] for token_id in range(size)])
        else:
            special = set(backend.all_special_ids)
            size = len(backend)
            texts = backend.batch_decode([[token_id] for token_id in range(size)])
        # Tokens that decode to text of their own: a lone byte of a multi-byte character decodes to
        # U+FFFD, which re-encodes as several tokens and would make exact lengths hard to reach.
        self._sampleable = [
            token_id
            for token_id, text in zip(range(size), texts)
            if token_id not in special and text and "\ufffd" not in text
        ]
        if not self._sampleable:
            raise BenchError(f"tokenizer {name} has no token that decodes to text")

    def encode(self, text: str) -> List[int]:
        if self._library == "tokenizers":
            return list(self._backend.encode(text, add_special_tokens=False).ids)
        return list(self._backend.encode(text, add_special_tokens=False))

    def decode(self, ids: Sequence[int]) -> str:
        return str(self._backend.decode(list(ids)))

    def filler_ids(self, rng: random.Random, count: int) -> List[int]:
        return [rng.choice(self._sampleable) for _ in range(count)]


def _tokenizer_json_in(path: str) -> Optional[str]:
    if os.path.isfile(path) and path.endswith(".json"):
        return path
    candidate = os.path.join(path, "tokenizer.json")
    return candidate if os.path.isfile(candidate) else None


def load_local_tokenizer(path: str, trust_remote_code: bool = False) -> Optional[LocalTokenizer]:
    """Load ``path`` (tokenizer.json, or a directory holding one or a transformers tokenizer, which
    may run the directory's own code with ``trust_remote_code``).

    Returns None when ``path`` holds no tokenizer this machine can read; raises ``BenchError`` when it
    does but loading fails.
    """
    json_file = _tokenizer_json_in(path)
    if json_file is not None:
        try:
            import tokenizers
        except ImportError:
            tokenizers = None  # type: ignore[assignment]
        if tokenizers is not None:
            try:
                return LocalTokenizer(path, tokenizers.Tokenizer.from_file(json_file), "tokenizers")
            except Exception as exc:
                raise BenchError(f"cannot load tokenizer {json_file}: {exc}") from exc
    if os.path.isdir(path):
        try:
            import transformers
        except ImportError:
            return None
        try:
            backend = transformers.AutoTokenizer.from_pretrained(path, trust_remote_code=trust_remote_code)
        except Exception as exc:
            raise BenchError(f"cannot load tokenizer from {path}: {exc}") from exc
        return LocalTokenizer(path, backend, "transformers")
    return None


class TokenizeUnavailable(Exception):
    """The server has no usable /tokenize endpoint."""


class ServerTokenizer(Tokenizer):
    """The server's ``/tokenize`` and ``/detokenize`` endpoints (vLLM's request and response shape).

    ``count`` remembers what the server answered for each text (up to :data:`MAX_COUNTED_CHARS`
    characters in all): a benchmark sized in rounds builds each round of a dataset read from a file
    from the entries of the rounds before it and the next ones (``perflab.bench.rounds.round_spec``),
    and a round trip per entry already counted would make the n-th round cost n rounds' worth."""

    kind = "server"

    def __init__(self, base_url: str, model: str, headers: Dict[str, str], timeout: float = 60.0) -> None:
        parts = urllib.parse.urlsplit(base_url)
        self.name = f"{base_url}/tokenize"
        self._secure = parts.scheme == "https"
        self._host = parts.hostname or "127.0.0.1"
        self._port = parts.port or (443 if self._secure else 80)
        self._prefix = parts.path.rstrip("/")
        self._model = model
        self._headers = dict(headers, **{"Content-Type": "application/json"})
        self._timeout = timeout
        self._conn: Optional[http.client.HTTPConnection] = None
        self._counts: Dict[str, int] = {}
        self._counted_chars = 0

    def _connection(self) -> http.client.HTTPConnection:
        if self._conn is None:
            factory = http.client.HTTPSConnection if self._secure else http.client.HTTPConnection
            self._conn = factory(self._host, self._port, timeout=self._timeout)
        return self._conn

    def _post(self, path: str, body: Dict[str, Any]) -> Dict[str, Any]:
        payload = json.dumps(body).encode("utf-8")
        for attempt in (1, 2):
            conn = self._connection()
            try:
                conn.request("POST", self._prefix + path, payload, self._headers)
                response = conn.getresponse()
                if response.status != 200:
                    conn.close()
                    self._conn = None
                    raise TokenizeUnavailable(f"{self._prefix + path} answered HTTP {response.status}")
                data = _read_answer(response)
                break
            except AnswerTooLarge as exc:
                conn.close()
                self._conn = None
                raise TokenizeUnavailable(f"{self._prefix + path}: {exc}") from None
            except (OSError, http.client.HTTPException) as exc:
                conn.close()
                self._conn = None
                if attempt == 2:
                    raise TokenizeUnavailable(f"{self.name}: {exc}") from exc
        try:
            parsed = json.loads(data)
        except (ValueError, RecursionError):
            raise TokenizeUnavailable(f"{self._prefix + path} answered invalid JSON") from None
        if not isinstance(parsed, dict):
            raise TokenizeUnavailable(
                f"{self._prefix + path} answered {type(parsed).__name__}, not an object"
            )
        return parsed

    def encode(self, text: str) -> List[int]:
        tokens = self._post(
            "/tokenize", {"model": self._model, "prompt": text, "add_special_tokens": False}
        ).get("tokens")
        if not isinstance(tokens, list):
            raise TokenizeUnavailable("/tokenize answered without a 'tokens' list")
        if not all(isinstance(token, int) and 0 <= token < 2**31 for token in tokens):
            raise TokenizeUnavailable("/tokenize answered tokens that are not token ids")
        return tokens

    def count(self, text: str) -> int:
        known = self._counts.get(text)
        if known is not None:
            return known
        count = len(self.encode(text))
        if self._counted_chars + len(text) <= MAX_COUNTED_CHARS:
            self._counts[text] = count
            self._counted_chars += len(text)
        return count

    def decode(self, ids: Sequence[int]) -> str:
        text = self._post("/detokenize", {"model": self._model, "tokens": list(ids)}).get("prompt")
        if not isinstance(text, str):
            raise TokenizeUnavailable("/detokenize answered without a 'prompt' string")
        return text

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def first_served_model(base_url: str, headers: Dict[str, str], timeout: float = 30.0) -> str:
    """The id of the first model the server lists at ``/v1/models`` (``vllm bench serve`` without
    ``--model`` asks the same); ``BenchError`` when it cannot say."""
    where = f"{base_url}/v1/models"
    try:
        status, data = server_call(base_url, "GET", "/v1/models", headers, timeout=timeout)
    except ServerUnavailable as exc:
        raise BenchError(f"no --model given and {where} cannot be read: {exc}") from exc
    if status != 200:
        raise BenchError(f"no --model given and {where} answered HTTP {status}")
    try:
        models = json.loads(data).get("data") or []
        return str(models[0]["id"])
    except (ValueError, AttributeError, IndexError, KeyError, TypeError, RecursionError):
        raise BenchError(f"no --model given and {where} lists no model") from None


def probe_server_tokenizer(base_url: str, model: str, headers: Dict[str, str]) -> Optional[ServerTokenizer]:
    """A ``ServerTokenizer`` when the server tokenizes and detokenizes, else None."""
    tokenizer = ServerTokenizer(base_url, model, headers)
    try:
        ids = tokenizer.encode("Hello world")
        tokenizer.decode(ids)
    except TokenizeUnavailable:
        tokenizer.close()
        return None
    return tokenizer


@dataclass
class Tokenizers:
    """The local tokenizer and the server's /tokenize, each when available."""

    local: Optional[LocalTokenizer]
    server: Optional[ServerTokenizer]

    @property
    def best(self) -> Optional[Tokenizer]:
        return self.local if self.local is not None else self.server

    def close(self) -> None:
        if self.server is not None:
            self.server.close()


def resolve_tokenizers(
    tokenizer: Optional[str],
    model: str,
    base_url: str,
    headers: Dict[str, str],
    served_model: Optional[str] = None,
    trust_remote_code: bool = False,
) -> Tokenizers:
    """``tokenizer`` (or ``model`` when it is a local directory), and the server's /tokenize (asked
    for ``served_model``, else ``model``)."""
    if tokenizer:
        local = load_local_tokenizer(tokenizer, trust_remote_code)
        if local is None:
            raise BenchError(
                f"--tokenizer {tokenizer}: no tokenizer.json there, and transformers cannot load it"
            )
    else:
        local = load_local_tokenizer(model, trust_remote_code)
    return Tokenizers(local, probe_server_tokenizer(base_url, served_model or model, headers))
