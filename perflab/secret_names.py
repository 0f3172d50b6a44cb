"""Which variable, flag and key names denote a secret (``HF_TOKEN``, ``--api-key``, ``db_password``).

The lowest of the secret modules: hosts.yaml's validation refuses a secret-named ``env:`` entry with
it, :mod:`perflab.secrets` gathers secret-named variables with it and :mod:`perflab.redact` masks
secret-named assignments and flags with it.
"""

from __future__ import annotations

import re

# Names of variables, flags and keys that hold secrets: anywhere in the name for the unambiguous words,
# as the last word for TOKEN (so MAX_TOKENS, TOKENIZER and BOS_TOKEN_ID stay readable).
_SECRET_WORDS = re.compile(r"PASSWORD|PASSWD|PASSPHRASE|SECRET|API_?KEY|PRIVATE_KEY|CREDENTIAL|(?:^|_)TOKEN$")
# Names that say where a secret is, not what it is (PERFLAB_PASSWORD_FILE, password_env).
_LOCATION_SUFFIX = re.compile(r"_(?:FILE|PATH|ENV|DIR|NAME)$")


def is_secret_name(name: str) -> bool:
    """Whether a variable, flag or key name holds a secret (``HF_TOKEN``, ``--api-key``, ``db_password``)."""
    upper = name.strip("-").upper().replace("-", "_")
    return bool(_SECRET_WORDS.search(upper)) and not _LOCATION_SUFFIX.search(upper)
