"""Tool calling: OpenAI tools and ``tool_choice``, a model family's structural tag, and the
parsers that read calls back (whole output or streamed) as OpenAI-shaped ``tool_calls``.

XGrammar builds the structural tag (``get_model_structural_tag``); tokensieve also parses
the output with the same definition, so what the grammar lets the model write is what the
parser reads::

    fmt = tokensieve.tools.ToolCallFormat("hermes", tools)
    compiled = compiler.compile_structural_tag(fmt.structural_tag("auto"))
    ...generate...
    message = fmt.parse(text)   # {"content": ..., "reasoning": ..., "tool_calls": [...], "errors": [...]}
"""

import json
import secrets
import string
from typing import Any, Dict, List, Optional, Union

from . import _core

__all__ = [
    "ToolCallFormat",
    "StreamingParser",
    "format_names",
    "get_model_structural_tag",
    "MODEL_FORMATS",
]

#: XGrammar's ``get_model_structural_tag`` model names that tokensieve covers, and the
#: tokensieve format each maps to.
MODEL_FORMATS: Dict[str, str] = {
    "llama": "llama3_json",
    "qwen_3": "hermes",
    "qwen_3_coder": "qwen3_coder",
    "qwen_3_5": "qwen3_coder",
    "kimi": "kimi_k2",
    "deepseek_r1": "deepseek_v3",
    "deepseek_v3_1": "deepseek_v31",
    "harmony": "harmony",
    "glm_4_7": "glm47",
    "deepseek_v3_2": "deepseek_v32",
    "deepseek_v4": "deepseek_v4",
    "minimax": "minimax_m2",
}


def format_names() -> List[str]:
    """The names of the registered tool-call formats (``hermes``, ``llama3_json``, ...)."""
    return list(_core.tool_call_format_names())


def _tool_choice_text(tool_choice: Union[str, Dict[str, Any], None]) -> str:
    return json.dumps("auto" if tool_choice is None else tool_choice)


_ID_ALPHABET = string.ascii_letters + string.digits


def _call_id() -> str:
    """A generated OpenAI-style tool call id: ``call_`` and 24 random letters and digits."""
    return "call_" + "".join(secrets.choice(_ID_ALPHABET) for _ in range(24))


def _with_id(call: Dict[str, Any], call_id: Optional[str] = None) -> Dict[str, Any]:
    """``call`` in OpenAI's key order with an ``id``: its own (the model's) when it has one,
    else ``call_id``, else a new generated one."""
    own = call.get("id")
    out = {"id": own if own is not None else (call_id or _call_id())}
    out.update((k, v) for k, v in call.items() if k != "id")
    return out


class StreamingParser:
    """Reads a streamed output delta by delta. :meth:`push` and :meth:`finish` return the
    events settled so far, dicts with a ``type`` of ``content``, ``reasoning``,
    ``tool_call_start`` (``index``, ``id``, ``name``), ``tool_call_arguments`` (``index``,
    ``delta``: argument text, as an OpenAI server streams ``function.arguments``),
    ``tool_call_end`` (``index``, ``tool_call`` in OpenAI's shape) or ``malformed``
    (``text``, ``offset``, ``error``)."""

    def __init__(self, core: "_core.StreamingParser") -> None:
        self._parser = core
        self._ids: Dict[int, str] = {}

    def _identify(self, events: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
        """Gives every call an id (the model's, else a generated ``call_…``), the same in its
        ``tool_call_start`` and ``tool_call_end`` events."""
        for event in events:
            kind = event.get("type")
            if kind == "tool_call_start":
                if event.get("id") is None:
                    event["id"] = self._ids.setdefault(event["index"], _call_id())
                else:
                    self._ids[event["index"]] = event["id"]
            elif kind == "tool_call_end":
                event["tool_call"] = _with_id(event["tool_call"], self._ids.get(event["index"]))
        return events

    def push(self, delta: str) -> List[Dict[str, Any]]:
        """Feeds more output."""
        return self._identify(json.loads(self._parser.push(delta)))

    def finish(self) -> List[Dict[str, Any]]:
        """Ends the output: the remaining events."""
        return self._identify(json.loads(self._parser.finish()))

    @property
    def text(self) -> str:
        """The output received so far."""
        return self._parser.text()


class ToolCallFormat:
    """A model family's tool-call syntax for a list of tools.

    Parameters
    ----------
    name : str
        A registered format (see :func:`format_names`; case is ignored).
    tools : list of dict, or JSON text
        OpenAI's ``tools`` array (``{"type": "function", "function": {"name", "description",
        "parameters", "strict"}}``).
    reasoning : bool, default False
        The output opens with the family's reasoning block (``<think>…</think>``), where
        call markers are forbidden.
    any_order : bool, default False
        Argument properties in any order.
    text_after_calls : bool, default False
        Free text may follow the calls (XGrammar's looser behaviour).
    max_whitespace_cnt : int, optional
        The most whitespace characters in one place inside arguments.

    Raises
    ------
    ValueError
        For an unknown format name or a bad tool definition (the message says which).
    """

    def __init__(
        self,
        name: str,
        tools: Union[List[Dict[str, Any]], str],
        *,
        reasoning: bool = False,
        any_order: bool = False,
        text_after_calls: bool = False,
        max_whitespace_cnt: Optional[int] = None,
    ) -> None:
        text = tools if isinstance(tools, str) else json.dumps(list(tools))
        self._format = _core.ToolCallFormat(
            name, text, reasoning, any_order, text_after_calls, max_whitespace_cnt
        )

    @property
    def name(self) -> str:
        """The registry name of the format."""
        return self._format.name

    @property
    def tool_names(self) -> List[str]:
        """The tools' names, in order."""
        return list(self._format.tool_names)

    def structural_tag(
        self, tool_choice: Union[str, Dict[str, Any], None] = "auto", parallel_tool_calls: bool = True
    ) -> Dict[str, Any]:
        """The structural tag (XGrammar's JSON, as a dict) for OpenAI's ``tool_choice``
        (``"none"``, ``"auto"``, ``"required"``, ``{"type": "function", "function": {"name":
        ...}}``, ``{"type": "allowed_tools", ...}``); give it to
        :meth:`GrammarCompiler.compile_structural_tag`.

        Raises
        ------
        ValueError
            For a tool_choice that cannot be read or names an unknown tool.
        """
        return json.loads(self._format.structural_tag(_tool_choice_text(tool_choice), parallel_tool_calls))

    def parse(self, text: str) -> Dict[str, Any]:
        """Parses a whole output: ``{"content", "reasoning", "tool_calls", "errors"}`` with
        ``tool_calls`` in OpenAI's shape (``{"id", "type": "function", "function": {"name",
        "arguments": JSON text}}``; ``id`` is the model's when the format writes one, else a
        generated ``call_…``). Never raises: unreadable calls are in ``errors`` and their
        text stays in ``content``."""
        message = json.loads(self._format.parse(text))
        message["tool_calls"] = [_with_id(c) for c in message.get("tool_calls") or []]
        return message

    def streaming_parser(self) -> StreamingParser:
        """A new :class:`StreamingParser` for one output."""
        return StreamingParser(self._format.streaming_parser())

    def render_tools_prompt(self) -> str:
        """The tools' declaration for the prompt, as the family's chat template writes it."""
        return self._format.render_tools_prompt()


def get_model_structural_tag(
    model: str,
    tools: Optional[List[Dict[str, Any]]] = None,
    tool_choice: Union[str, Dict[str, Any], None] = "auto",
    reasoning: Union[bool, str] = "enabled",
    force_reasoning: bool = False,
    any_order: bool = False,
    exclude_special_tokens: bool = True,
    max_whitespace_cnt: Optional[int] = None,
    parallel_tool_calls: bool = True,
    token_markers: bool = False,
) -> Dict[str, Any]:
    """XGrammar's ``get_model_structural_tag`` for the model names of :data:`MODEL_FORMATS`:
    the structural tag (a dict) of the family's tool calls under ``tool_choice``.

    ``reasoning``, as XGrammar's, for the families with a reasoning block (Qwen3, DeepSeek,
    Kimi, GLM, harmony): ``"enabled"`` (the default; also ``True``) starts INSIDE the block,
    whose opener the chat template already wrote into the prompt (the output is
    ``…</think>\n\n`` then the answer); ``"auto"`` allows a complete block or none;
    ``"disabled"`` (also ``False``) has none. ``force_reasoning`` and
    ``exclude_special_tokens=False`` are not supported (ValueError).
    ``parallel_tool_calls=False`` allows at most one call. ``token_markers`` is accepted
    for XGrammar's signature and changes nothing: a marker that is a special token of the
    vocabulary is always matched as that token when the tag is compiled (what XGrammar does
    with ``token_markers=True``), never as its text spelled by other tokens. The result is a
    dict of XGrammar's JSON, not XGrammar's pydantic ``StructuralTag``.

    Raises
    ------
    ValueError
        For a model name tokensieve does not cover, unsupported options, bad tools or
        tool_choice.
    """
    if model not in MODEL_FORMATS:
        raise ValueError(
            f"model {model!r} is not covered; covered: {sorted(MODEL_FORMATS)} "
            f"(or use ToolCallFormat with one of {format_names()})"
        )
    if isinstance(reasoning, bool):
        mode = "enabled" if reasoning else "disabled"
    elif reasoning in ("enabled", "disabled", "auto"):
        mode = reasoning
    else:
        raise ValueError(
            f"reasoning must be a bool or one of 'enabled', 'disabled', 'auto', not {reasoning!r}"
        )
    if force_reasoning or not exclude_special_tokens:
        raise ValueError("force_reasoning and exclude_special_tokens=False are not supported")
    fmt_name = MODEL_FORMATS[model]
    fmt = ToolCallFormat(
        fmt_name,
        tools or [],
        reasoning=mode != "disabled" and model != "llama",
        any_order=any_order,
        max_whitespace_cnt=max_whitespace_cnt,
    )
    tag = fmt.structural_tag(tool_choice, parallel_tool_calls=bool(parallel_tool_calls))
    # llama has no reasoning block: its first element may be a tool call's tag.
    return tag if model == "llama" else _reasoning_mode(tag, mode)


def _reasoning_mode(tag: Dict[str, Any], mode: str) -> Dict[str, Any]:
    """Rewrites the leading reasoning block of ``tag`` (the first element of its top-level
    sequence, a ``tag``, and what precedes the answer) for XGrammar's ``mode``: "enabled"
    drops the block's opener (the prompt holds it), "auto" makes the whole block optional.
    A tag without a reasoning block is returned as it is."""
    fmt = tag.get("format", {})
    elements = fmt.get("elements") if fmt.get("type") == "sequence" else None
    if mode == "disabled" or not elements or elements[0].get("type") != "tag":
        return tag
    block, rest = elements[:-1], elements[-1:]
    if mode == "enabled":
        block[0] = {**block[0], "begin": ""}
    else:
        block = [{"type": "optional", "content": {"type": "sequence", "elements": block}}]
    fmt["elements"] = block + rest
    return tag
