"""Grammar: the grammar of a JSON Schema, regex, EBNF text or structural tag, before it is
compiled against a vocabulary (XGrammar's ``Grammar``)."""

import json
from typing import Any, Dict, List, Optional, Sequence, Tuple, Type, Union

from . import _core

__all__ = ["Grammar", "StructuralTagItem"]


class StructuralTagItem:
    """One tag of XGrammar's legacy structural tag form ``(tags, triggers)``: text ``begin``,
    then a JSON value of ``schema``, then ``end``. Deprecated in XGrammar; use the JSON form
    (``{"type": "structural_tag", "format": ...}``)."""

    def __init__(self, *, begin: str, schema: Any, end: str) -> None:
        self.begin = begin
        self.schema = schema
        self.end = end

    def __repr__(self) -> str:
        return f"StructuralTagItem(begin={self.begin!r}, end={self.end!r})"


def _schema_dict(schema: Any) -> Any:
    """A schema given as str, dict or pydantic model class, as a JSON value."""
    if isinstance(schema, str):
        try:
            return json.loads(schema)
        except json.JSONDecodeError as e:
            raise _core.InvalidJSONError(f"the schema is not valid JSON: {e}") from e
    if isinstance(schema, (dict, bool)):
        return schema
    if isinstance(schema, type) and hasattr(schema, "model_json_schema"):
        return schema.model_json_schema()
    raise TypeError(
        f"a schema is a JSON string, a dict or a pydantic model class, not {type(schema)}"
    )


def _schema_text(schema: Any) -> str:
    if isinstance(schema, str):
        return schema
    return json.dumps(_schema_dict(schema))


def _separators(separators: Optional[Tuple[str, str]]) -> Optional[Tuple[str, str]]:
    """``separators`` as a pair of str (XGrammar takes any 2-sequence), or None."""
    if separators is None:
        return None
    try:
        item, key = separators
    except (TypeError, ValueError):
        raise ValueError(
            f"separators must be a pair (item separator, key separator), such as "
            f'(", ", ": "), not {separators!r}'
        ) from None
    return (str(item), str(key))


def _structural_tag_text(args: Sequence[Any], kwargs: Dict[str, Any]) -> str:
    """The JSON text of a structural tag given as (tag) or the legacy (tags, triggers)."""
    if "structural_tag" in kwargs:
        args = (kwargs.pop("structural_tag"), *args)
    if "tags" in kwargs or "triggers" in kwargs:
        args = (kwargs.pop("tags"), kwargs.pop("triggers"), *args)
    if kwargs:
        raise TypeError(f"unexpected keyword arguments {sorted(kwargs)}")
    if len(args) == 1:
        tag = args[0]
        if isinstance(tag, str):
            return tag
        if isinstance(tag, dict):
            return json.dumps(tag)
        if hasattr(tag, "model_dump_json"):
            return tag.model_dump_json(by_alias=True)
        raise TypeError(f"a structural tag is a JSON string or a dict, not {type(tag)}")
    if len(args) == 2:
        tags, triggers = args
        items = []
        for t in tags:
            schema = getattr(t, "schema", None)
            if schema is None:
                schema = getattr(t, "schema_", None)
            items.append(
                {
                    "type": "tag",
                    "begin": t.begin,
                    "content": {"type": "json_schema", "json_schema": _schema_dict(schema)},
                    "end": t.end,
                }
            )
        return json.dumps(
            {
                "type": "structural_tag",
                "format": {"type": "triggered_tags", "triggers": list(triggers), "tags": items},
            }
        )
    raise TypeError("expected (structural_tag) or the legacy (tags, triggers)")


def _core_grammars(grammars: Sequence[Any]) -> List["_core.Grammar"]:
    for g in grammars:
        if not isinstance(g, Grammar):
            raise TypeError(f"expected Grammar arguments, got {type(g)}")
    return [g._grammar for g in grammars]


class Grammar:
    """A grammar (the engine's IR). ``str(grammar)`` is its EBNF text."""

    def __init__(self, core: "_core.Grammar") -> None:
        self._grammar = core

    def __str__(self) -> str:
        return str(self._grammar)

    def __repr__(self) -> str:
        return f"Grammar({str(self)!r})"

    def to_string(self) -> str:
        """The EBNF text (as ``str(grammar)``)."""
        return str(self._grammar)

    @staticmethod
    def from_ebnf(ebnf_string: str, *, root_rule_name: str = "root") -> "Grammar":
        """Parses EBNF (XGrammar's dialect or llama.cpp GBNF).

        Raises
        ------
        tokensieve.exception.TokensieveError
            For a syntax error (with line:column) or an undefined rule.
        """
        return Grammar(_core.Grammar.from_ebnf(ebnf_string, root_rule_name))

    @staticmethod
    def from_json_schema(
        schema: Union[str, Type[Any], Dict[str, Any]],
        *,
        any_whitespace: bool = True,
        indent: Optional[int] = None,
        separators: Optional[Tuple[str, str]] = None,
        strict_mode: bool = True,
        max_whitespace_cnt: Optional[int] = None,
        any_order: bool = False,
    ) -> "Grammar":
        """The grammar of the JSON texts a schema accepts (see
        :meth:`GrammarCompiler.compile_json_schema` for the parameters)."""
        return Grammar(
            _core.Grammar.from_json_schema(
                _schema_text(schema),
                any_whitespace,
                max_whitespace_cnt,
                strict_mode,
                any_order,
                indent,
                _separators(separators),
            )
        )

    @staticmethod
    def from_regex(regex_string: str) -> "Grammar":
        """The grammar of a regular expression (the whole output matches it), in
        XGrammar's dialect (see :meth:`GrammarCompiler.compile_regex`)."""
        return Grammar(_core.Grammar.from_regex(regex_string))

    @staticmethod
    def from_structural_tag(*args: Any, **kwargs: Any) -> "Grammar":
        """The grammar of a structural tag: XGrammar's JSON (str or dict), or the legacy
        ``(tags, triggers)``."""
        return Grammar(_core.Grammar.from_structural_tag(_structural_tag_text(args, kwargs)))

    @staticmethod
    def union(*grammars: "Grammar") -> "Grammar":
        """A grammar matching what any one of ``grammars`` matches (XGrammar's
        ``Grammar.union``): ``root ::= root_1 | root_2 | …``, the rules renamed apart."""
        return Grammar(_core.Grammar.union(_core_grammars(grammars)))

    @staticmethod
    def concat(*grammars: "Grammar") -> "Grammar":
        """A grammar matching one match of each of ``grammars`` in order (XGrammar's
        ``Grammar.concat``): ``root ::= root_1 root_2 …``, the rules renamed apart."""
        return Grammar(_core.Grammar.concat(_core_grammars(grammars)))

    @staticmethod
    def builtin_json_grammar() -> "Grammar":
        """XGrammar's built-in JSON grammar: an object or an array, no whitespace before or
        after it."""
        return Grammar(_core.Grammar.builtin_json_grammar())
