"""TokenizerInfo: a model's vocabulary, with XGrammar's constructors and properties."""

import json
from enum import Enum
from typing import Any, Dict, List, Optional, Sequence, Union

from . import _core

__all__ = ["TokenizerInfo", "VocabType"]


class VocabType(Enum):
    """How the token strings of an encoded vocabulary stand for bytes (XGrammar's numbering).

    ``RAW``: each token is its own bytes (tiktoken). ``BYTE_FALLBACK``: SentencePiece, ``▁``
    is a space and ``<0xHH>`` the byte HH (Llama 2). ``BYTE_LEVEL``: GPT-2 byte-to-unicode
    characters (``Ġ`` is a space; Llama 3, Qwen).
    """

    RAW = 0
    BYTE_FALLBACK = 1
    BYTE_LEVEL = 2


def _stop_list(stop_token_ids: Optional[Union[int, Sequence[int]]]) -> Optional[List[int]]:
    if stop_token_ids is None:
        return None
    if isinstance(stop_token_ids, int):
        return [stop_token_ids]
    return [int(t) for t in stop_token_ids]


def _decoder_kinds(node: Any) -> List[str]:
    """The ``type`` of a tokenizer.json component and of its ``Sequence`` members."""
    if not isinstance(node, dict):
        return []
    kinds = [str(node.get("type"))]
    for key in ("decoders", "normalizers", "pretokenizers"):
        for sub in node.get(key) or []:
            kinds.extend(_decoder_kinds(sub))
    return kinds


def _metadata_from_tokenizer_json(tokenizer_json: Dict[str, Any]) -> Dict[str, Any]:
    """``vocab_type`` and ``add_prefix_space`` as XGrammar reports them for a tokenizer.json
    (metadata only: the token bytes come from the engine's loader)."""
    decoders = _decoder_kinds(tokenizer_json.get("decoder"))
    if "ByteLevel" in decoders:
        vocab_type = VocabType.BYTE_LEVEL
    elif "ByteFallback" in decoders:
        vocab_type = VocabType.BYTE_FALLBACK
    else:
        vocab_type = VocabType.RAW
    add_prefix_space = False
    normalizer = tokenizer_json.get("normalizer")
    stack = [normalizer] if isinstance(normalizer, dict) else []
    while stack:
        n = stack.pop()
        if n.get("type") == "Prepend" and n.get("prepend") == "▁":
            add_prefix_space = True
        stack.extend(x for x in n.get("normalizers") or [] if isinstance(x, dict))
    pre = tokenizer_json.get("pre_tokenizer")
    if isinstance(pre, dict) and pre.get("type") == "Metaspace":
        if pre.get("prepend_scheme") in ("always", "first"):
            add_prefix_space = True
    return {"vocab_type": vocab_type, "add_prefix_space": add_prefix_space}


class TokenizerInfo:
    """A model's vocabulary: every token id's bytes, its special and stop tokens, and the
    logits width ``vocab_size`` (the length in bits of a bitmask row), as XGrammar's
    ``TokenizerInfo``.

    Parameters
    ----------
    encoded_vocab : list of str or bytes
        The tokens' strings by id, encoded as ``vocab_type`` says.
    vocab_type : VocabType, default RAW
    vocab_size : int, optional
        The model's logits width (default: ``len(encoded_vocab)``); ids past the tokens are
        padding, never allowed.
    stop_token_ids : int or list of int, optional
        Default: the tokens spelled like a common end-of-sequence marker (``</s>``,
        ``<|eot_id|>``, ``<|im_end|>``, ``<|endoftext|>``, ...).
    add_prefix_space : bool, default False
        Whether the tokenizer prepends a space to the text it encodes (metadata; the token
        bytes are as given).

    Special tokens of an encoded vocabulary are the tokens with no bytes (XGrammar's rule);
    :meth:`from_huggingface` also knows the tokenizer's added special tokens, which are then
    atomic (grammar text never produces them).

    Raises
    ------
    ValueError
        For a stop id past the tokens, a ``vocab_size`` at or below a stop token's id.
    """

    def __init__(
        self,
        encoded_vocab: Union[List[bytes], List[str]],
        vocab_type: VocabType = VocabType.RAW,
        *,
        vocab_size: Optional[int] = None,
        stop_token_ids: Optional[Union[List[int], int]] = None,
        add_prefix_space: bool = False,
    ) -> None:
        vocab_type = VocabType(vocab_type)
        self._vocab = _core.Vocabulary.from_encoded_vocab(
            list(encoded_vocab), vocab_type.value, vocab_size, _stop_list(stop_token_ids)
        )
        self._vocab_type = vocab_type
        self._add_prefix_space = bool(add_prefix_space)

    @classmethod
    def _from_core(
        cls, vocab: "_core.Vocabulary", vocab_type: VocabType, add_prefix_space: bool
    ) -> "TokenizerInfo":
        self = cls.__new__(cls)
        self._vocab = vocab
        self._vocab_type = vocab_type
        self._add_prefix_space = add_prefix_space
        return self

    @staticmethod
    def from_huggingface(
        tokenizer: Any,
        *,
        vocab_size: Optional[int] = None,
        stop_token_ids: Optional[Union[List[int], int]] = None,
    ) -> "TokenizerInfo":
        """The vocabulary of a ``transformers`` tokenizer.

        A fast tokenizer is read from its ``tokenizer.json`` (``tokenizer.backend_tokenizer
        .to_str()``) by the engine's loader, which keeps the added special tokens atomic.
        Other tokenizers are read from ``get_vocab()`` and ``convert_ids_to_tokens`` (byte
        level when the vocabulary spells a space ``Ġ``, byte fallback when it has
        ``<0xHH>`` pieces, raw otherwise).

        Parameters
        ----------
        tokenizer : transformers.PreTrainedTokenizerBase
        vocab_size : int, optional
            The model's logits width (``config.vocab_size``); default the tokenizer's size.
            A width smaller than the tokenizer drops the tokens at or past it (never in a
            mask, rejected by ``accept_token``), as XGrammar does; a stop token among them
            is a ValueError.
        stop_token_ids : int or list of int, optional
            Default: ``[tokenizer.eos_token_id]`` when the tokenizer has one.

        Raises
        ------
        ValueError
            For an empty ``stop_token_ids``, ids past the vocabulary, a tokenizer that
            cannot be read.
        """
        stop = _stop_list(stop_token_ids)
        if stop is not None and len(stop) == 0:
            raise ValueError("stop_token_ids cannot be empty")
        if stop is None and getattr(tokenizer, "eos_token_id", None) is not None:
            stop = [int(tokenizer.eos_token_id)]
        backend = getattr(tokenizer, "backend_tokenizer", None)
        if backend is not None and hasattr(backend, "to_str"):
            text = backend.to_str()
            meta = _metadata_from_tokenizer_json(json.loads(text))
            vocab = _core.Vocabulary.from_tokenizer_json(text, None, vocab_size, stop)
            return TokenizerInfo._from_core(vocab, meta["vocab_type"], meta["add_prefix_space"])
        try:
            vocab_dict = tokenizer.get_vocab()
        except AttributeError as e:
            raise ValueError(
                f"cannot read the vocabulary of {type(tokenizer)}: it has neither a "
                "backend_tokenizer (fast tokenizer) nor get_vocab()"
            ) from e
        size = max(len(vocab_dict), max(vocab_dict.values()) + 1)
        encoded: List[str] = [""] * size
        for token, idx in vocab_dict.items():
            encoded[idx] = token
        if any(f"<0x{b:02X}>" in vocab_dict for b in range(256)):
            vocab_type = VocabType.BYTE_FALLBACK
        elif "Ġ" in vocab_dict:
            vocab_type = VocabType.BYTE_LEVEL
        else:
            vocab_type = VocabType.RAW
        return TokenizerInfo(
            encoded, vocab_type, vocab_size=vocab_size, stop_token_ids=stop
        )

    @property
    def vocab_type(self) -> VocabType:
        """How the encoded token strings stand for bytes."""
        return self._vocab_type

    @property
    def vocab_size(self) -> int:
        """The logits width: bits of a bitmask row."""
        return self._vocab.vocab_size

    @property
    def add_prefix_space(self) -> bool:
        """Whether the tokenizer prepends a space to the text it encodes."""
        return self._add_prefix_space

    @property
    def prepend_space_in_tokenization(self) -> bool:
        """Alias of :attr:`add_prefix_space` (XGrammar's older name)."""
        return self._add_prefix_space

    @property
    def decoded_vocab(self) -> List[bytes]:
        """Every token's bytes, by id."""
        return self._vocab.decoded_vocab

    @property
    def stop_token_ids(self) -> List[int]:
        """The stop token ids, ascending."""
        return self._vocab.stop_token_ids

    @property
    def special_token_ids(self) -> List[int]:
        """The special token ids (added/control tokens, empty tokens and the padding ids
        past the tokenizer), ascending."""
        special = self._vocab.special_token_ids
        return special + list(range(self._vocab.tokenizer_size, self._vocab.vocab_size))

    def dump_metadata(self) -> str:
        """The metadata as JSON: ``vocab_type`` (a number), ``vocab_size``,
        ``add_prefix_space``, ``stop_token_ids``; :meth:`from_vocab_and_metadata` takes it
        back with the encoded vocabulary."""
        return json.dumps(
            {
                "vocab_type": self._vocab_type.value,
                "vocab_size": self.vocab_size,
                "add_prefix_space": self._add_prefix_space,
                "stop_token_ids": self.stop_token_ids,
            }
        )

    @staticmethod
    def from_vocab_and_metadata(
        encoded_vocab: List[Union[bytes, str]], metadata: str
    ) -> "TokenizerInfo":
        """A TokenizerInfo from an encoded vocabulary and the JSON of :meth:`dump_metadata`.

        Raises
        ------
        ValueError
            For metadata that is not JSON or lacks a field.
        """
        try:
            meta = json.loads(metadata)
            return TokenizerInfo(
                encoded_vocab,
                VocabType(meta["vocab_type"]),
                vocab_size=meta["vocab_size"],
                stop_token_ids=meta["stop_token_ids"],
                add_prefix_space=meta["add_prefix_space"],
            )
        except (json.JSONDecodeError, KeyError, TypeError) as e:
            raise ValueError(f"invalid tokenizer metadata: {e}") from e

    def serialize_json(self) -> str:
        """The whole vocabulary as JSON (token bytes in hex, special and stop ids, sizes,
        metadata); :meth:`deserialize_json` reads it back."""
        return json.dumps(
            {
                "tokensieve_tokenizer_info": 1,
                "decoded_vocab": [t.hex() for t in self.decoded_vocab],
                "special_token_ids": self._vocab.special_token_ids,
                "stop_token_ids": self.stop_token_ids,
                "vocab_size": self.vocab_size,
                "vocab_type": self._vocab_type.value,
                "add_prefix_space": self._add_prefix_space,
            }
        )

    @staticmethod
    def deserialize_json(json_string: str) -> "TokenizerInfo":
        """Reads the JSON of :meth:`serialize_json`.

        Raises
        ------
        tokensieve.exception.InvalidJSONError
            For text that is not JSON or not a serialized TokenizerInfo.
        ValueError
            For inconsistent ids or sizes.
        """
        try:
            d = json.loads(json_string)
            if d.get("tokensieve_tokenizer_info") != 1:
                raise KeyError("tokensieve_tokenizer_info (format version 1)")
            tokens = [bytes.fromhex(t) for t in d["decoded_vocab"]]
            special, stop = d["special_token_ids"], d["stop_token_ids"]
            size, vtype, aps = d["vocab_size"], VocabType(d["vocab_type"]), d["add_prefix_space"]
        except (json.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError) as e:
            raise _core.InvalidJSONError(f"not a serialized TokenizerInfo: {e!r}") from e
        vocab = _core.Vocabulary.from_token_bytes(tokens, special, stop, size)
        return TokenizerInfo._from_core(vocab, vtype, bool(aps))

    def __repr__(self) -> str:
        return (
            f"TokenizerInfo(vocab_size={self.vocab_size}, vocab_type={self._vocab_type.name}, "
            f"stop_token_ids={self.stop_token_ids})"
        )
