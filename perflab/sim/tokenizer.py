"""Tokenizers of the simulated engines.

Two implementations share one small interface:

- :class:`WordTokenizer` (default, standard library only): a deterministic word-level tokenizer.
  A token is a run of word characters or one punctuation character (``\\w+|[^\\w\\s]``). Its
  vocabulary starts with :data:`BUILTIN_WORDS` generated pseudo-words (ids ``0 .. N-1``); any other
  token gets a stable id above that range from a CRC32 of its text. ``decode`` joins token texts with
  single spaces, so decoding ids and tokenizing the result gives the same ids back: a load generator
  can build prompts of an exact token length from random ids.
- :class:`HFTokenizer`: a ``tokenizer.json`` loaded with the optional ``tokenizers`` package.

Counting rule shared by the API: a completion prompt counts its own tokens; a chat request counts the
tokens of its message contents joined with ``"\\n"`` (no chat template is applied), so
``usage.prompt_tokens`` equals the ``/tokenize`` count of the same messages.
"""

from __future__ import annotations

import re
import zlib
from typing import Dict, List, Sequence

TOKEN_RE = re.compile(r"\w+|[^\w\s]")
_CONSONANTS = "bcdfghjklmnprstvz"
_VOWELS = "aeiou"
_SYLLABLES = [c + v for c in _CONSONANTS for v in _VOWELS]
BUILTIN_WORDS: List[str] = _SYLLABLES + [a + b for a in _SYLLABLES for b in _SYLLABLES]
_WORD_IDS: Dict[str, int] = {word: index for index, word in enumerate(BUILTIN_WORDS)}
_HASHED_ID_SPACE = 1 << 24
MAX_SEEN_WORDS = 1 << 20


class WordTokenizer:
    """Deterministic word-level tokenizer with an invertible built-in vocabulary."""

    name = "perflab-word"

    def __init__(self) -> None:
        self._hashed_text: Dict[int, str] = {}
        # Every word seen, with its id: prompts repeat their words, and hashing each again costs more than
        # the rest of a request's handling (the simulator would lag behind its own clock).
        self._seen: Dict[str, int] = dict(_WORD_IDS)

    @property
    def vocab_size(self) -> int:
        return len(BUILTIN_WORDS) + _HASHED_ID_SPACE

    def count(self, text: str) -> int:
        return len(TOKEN_RE.findall(text))

    def encode(self, text: str) -> List[int]:
        seen = self._seen
        pieces = TOKEN_RE.findall(text)
        ids = [seen.get(piece, -1) for piece in pieces]
        if -1 in ids:
            ids = [self._new_id(piece) if token_id < 0 else token_id for piece, token_id in zip(pieces, ids)]
        return ids

    def _new_id(self, piece: str) -> int:
        token_id = self._seen.get(piece)
        if token_id is None:
            token_id = len(BUILTIN_WORDS) + zlib.crc32(piece.encode("utf-8")) % _HASHED_ID_SPACE
            self._hashed_text.setdefault(token_id, piece)
            if len(self._seen) < MAX_SEEN_WORDS:
                self._seen[piece] = token_id
        return token_id

    def token_text(self, token_id: int) -> str:
        if 0 <= token_id < len(BUILTIN_WORDS):
            return BUILTIN_WORDS[token_id]
        return self._hashed_text.get(token_id, "<unk>")

    def decode(self, ids: Sequence[int]) -> str:
        return " ".join(self.token_text(token_id) for token_id in ids)


class HFTokenizer:
    """A Hugging Face ``tokenizer.json`` (needs the optional ``tokenizers`` package)."""

    def __init__(self, path: str) -> None:
        try:
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise ValueError(
                f"--tokenizer {path} needs the 'tokenizers' package, which is not installed"
            ) from exc
        try:
            self._tokenizer = Tokenizer.from_file(path)
        except Exception as exc:
            raise ValueError(f"cannot load tokenizer file {path}: {exc}") from exc
        self.name = path
        self._vocab = self._tokenizer.get_vocab_size()

    @property
    def vocab_size(self) -> int:
        return self._vocab

    def count(self, text: str) -> int:
        return len(self._tokenizer.encode(text, add_special_tokens=False).ids)

    def encode(self, text: str) -> List[int]:
        return list(self._tokenizer.encode(text, add_special_tokens=False).ids)

    def decode(self, ids: Sequence[int]) -> str:
        return self._tokenizer.decode(list(ids))


_PIECES = tuple(" " + word for word in BUILTIN_WORDS)
_PIECE_BYTES = tuple(piece.encode() for piece in _PIECES)
_FIRST_PIECE_BYTES = tuple(word.encode() for word in BUILTIN_WORDS)


def output_token_id(seed: int, index: int) -> int:
    """The built-in word id of the ``index``-th generated token of a sequence."""
    return (seed + index * 7919) % len(BUILTIN_WORDS)


def output_piece(seed: int, index: int) -> str:
    """Text of the ``index``-th generated token of a sequence (a space before all but the first).

    Generated text is made of built-in words whatever the tokenizer, so the word tokenizer counts
    exactly one token per generated piece.
    """
    word = output_token_id(seed, index)
    return BUILTIN_WORDS[word] if index == 0 else _PIECES[word]


def output_piece_bytes(seed: int, index: int) -> bytes:
    """``output_piece`` UTF-8 encoded, from a table (the per-token path of streaming)."""
    word = output_token_id(seed, index)
    return _FIRST_PIECE_BYTES[word] if index == 0 else _PIECE_BYTES[word]


def load_tokenizer(path: str = ""):
    """The tokenizer for ``--tokenizer PATH`` (a tokenizer.json), else the built-in word tokenizer."""
    return HFTokenizer(path) if path else WordTokenizer()
