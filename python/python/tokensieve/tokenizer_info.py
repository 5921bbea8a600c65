"""TokenizerInfo: a model's vocabulary, with XGrammar's constructors and properties."""

import base64
import binascii
import json
from enum import Enum
from typing import Any, Dict, List, Optional, Sequence, Union

from . import _core
from .exception import DeserializeFormatError

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
        encoded_vocab = list(encoded_vocab)
        if vocab_size is not None and vocab_size < len(encoded_vocab):
            # As XGrammar: a logits width below the token count is an error, not a cut.
            raise ValueError(
                f"vocab_size ({vocab_size}) must be at least the number of tokens in the "
                f"vocabulary ({len(encoded_vocab)})"
            )
        self._vocab = _core.Vocabulary.from_encoded_vocab(
            encoded_vocab, vocab_type.value, vocab_size, _stop_list(stop_token_ids)
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

    def serialize_bytes(self) -> bytes:
        """The engine's vocabulary as bytes (``Vocabulary::serialize``: a 40-byte header with
        the magic ``TSVOCAB\\0``, format version, fingerprint, length and checksum, then a
        postcard payload: every token's bytes, the special and stop ids, the sizes). The
        metadata ``vocab_type`` and ``add_prefix_space`` is not in it: give it back to
        :meth:`deserialize_bytes`, or use :meth:`serialize_json`, which holds both."""
        return self._vocab.serialize()

    @staticmethod
    def deserialize_bytes(
        data: bytes,
        *,
        vocab_type: "VocabType" = VocabType.RAW,
        add_prefix_space: bool = False,
    ) -> "TokenizerInfo":
        """Reads the bytes of :meth:`serialize_bytes` (with the metadata given here).

        Raises
        ------
        tokensieve.exception.DeserializeFormatError
            (a ValueError) for bytes that are too short, of another kind, truncated,
            damaged or malformed; ``DeserializeVersionError`` for a format version this one does not read (newer or older).
        TypeError
            For ``data`` that is not bytes-like.
        """
        if isinstance(data, str) or not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"data must be bytes, not {type(data)}")
        vocab = _core.Vocabulary.deserialize(bytes(data))
        return TokenizerInfo._from_core(vocab, VocabType(vocab_type), bool(add_prefix_space))

    def serialize_json(self) -> str:
        """This TokenizerInfo as a JSON object (XGrammar's name; the content is
        tokensieve's): ``{"tokensieve": "TokenizerInfo", "format": 1, "vocab_type": <int>,
        "add_prefix_space": <bool>, "vocabulary": <base64 of serialize_bytes()>}``.
        :meth:`deserialize_json` reads it back; a grammar compiled on this TokenizerInfo
        loads against the copy (same fingerprint)."""
        return json.dumps(
            {
                "tokensieve": "TokenizerInfo",
                "format": 1,
                "vocab_type": self._vocab_type.value,
                "add_prefix_space": self._add_prefix_space,
                "vocabulary": base64.b64encode(self.serialize_bytes()).decode("ascii"),
            }
        )

    @staticmethod
    def deserialize_json(json_string: str) -> "TokenizerInfo":
        """Reads the JSON of :meth:`serialize_json`.

        Raises
        ------
        tokensieve.exception.DeserializeFormatError
            (a ValueError and an ``InvalidJSONError``) for text that is not JSON, not a
            serialized TokenizerInfo, or whose vocabulary bytes cannot be read;
            ``DeserializeVersionError`` for a format version this one does not read (newer or older).
        """
        d = _json_object(json_string, "TokenizerInfo")
        try:
            data = _b64_field(d, "vocabulary")
            vtype = VocabType(d["vocab_type"])
            aps = d["add_prefix_space"]
            if not isinstance(aps, bool):
                raise TypeError(f"add_prefix_space is a {type(aps).__name__}, not a bool")
        except (KeyError, TypeError, ValueError) as e:
            raise DeserializeFormatError(f"not a serialized TokenizerInfo: {e!r}") from e
        return TokenizerInfo.deserialize_bytes(data, vocab_type=vtype, add_prefix_space=aps)

    def __reduce__(self):
        """Pickles through :meth:`serialize_bytes` and the metadata."""
        return (_tokenizer_info_from_bytes, (self.serialize_bytes(), self._vocab_type.value, self._add_prefix_space))

    def _grammar_loader(self) -> "_core.GrammarCompiler":
        """The compiler that grammars serialized for this vocabulary are loaded with
        (``CompiledGrammar::deserialize`` needs one: its trie and mask cache serve the masks
        computed after loading). Made on first use and kept."""
        loader = getattr(self, "_loader", None)
        if loader is None:
            loader = _core.GrammarCompiler(self._vocab, 1)
            self._loader = loader
        return loader

    def __repr__(self) -> str:
        return (
            f"TokenizerInfo(vocab_size={self.vocab_size}, vocab_type={self._vocab_type.name}, "
            f"stop_token_ids={self.stop_token_ids})"
        )


def _tokenizer_info_from_bytes(data: bytes, vocab_type: int, add_prefix_space: bool) -> TokenizerInfo:
    """Unpickles a TokenizerInfo (:meth:`TokenizerInfo.__reduce__`)."""
    return TokenizerInfo.deserialize_bytes(data, vocab_type=VocabType(vocab_type), add_prefix_space=add_prefix_space)


def _json_object(text: Any, what: str) -> Dict[str, Any]:
    """The JSON object of a serialized ``what``, or DeserializeFormatError."""
    if not isinstance(text, (str, bytes, bytearray)):
        raise TypeError(f"the serialized {what} must be a str, not {type(text)}")
    try:
        d = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise DeserializeFormatError(f"not a serialized {what}: invalid JSON: {e}") from e
    if not isinstance(d, dict) or d.get("tokensieve", what) != what:
        raise DeserializeFormatError(
            f"not a serialized {what}: expected a JSON object with \"tokensieve\": \"{what}\""
        )
    if d.get("format", 1) != 1:
        from .exception import DeserializeVersionError

        raise DeserializeVersionError(
            f"a serialized {what} of format {d.get('format')!r}; this tokensieve reads format 1"
        )
    return d


def _b64_field(d: Dict[str, Any], key: str) -> bytes:
    """The bytes of the base64 field ``key`` (KeyError / TypeError / ValueError otherwise)."""
    v = d[key]
    if not isinstance(v, str):
        raise TypeError(f"{key} is a {type(v).__name__}, not a base64 str")
    try:
        return base64.b64decode(v, validate=True)
    except binascii.Error as e:
        raise ValueError(f"{key} is not base64: {e}") from e
