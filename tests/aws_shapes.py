"""A strict check of AWS request bodies against botocore's own service models.

botocore's `ParamValidator` (what the SDK runs before sending) checks types, required and unknown members
and a shape's `min`, but not `max`, `enum` or `pattern`: it accepts `InstanceType: ml.g7e.xlarge`, a
`ContainerStartupHealthCheckTimeoutInSeconds` of 99999 and a misspelled `PredefinedMetricType`, which AWS
itself refuses. `request_errors` runs botocore's validator and then walks the same shapes for every
constraint the model states that it leaves out: enum, max (numbers), maximum length (strings, lists, maps),
minimum length of maps, and pattern.

A value must match a pattern whole, as AWS's services check them (`Member must satisfy regular expression
pattern: ^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}` refuses `my_model`). Patterns are Java regular expressions;
the few constructs Python's `re` lacks are translated
(`\\p{L}`-style Unicode categories and POSIX classes, surrogate-pair ranges for the supplementary planes,
a literal `-` after a class escape, a quantifier on `$`, `\\z` for the end of input).

    from tests.aws_shapes import assert_valid_request
    assert_valid_request("sagemaker", "CreateModel", plan.create_model)
"""

from __future__ import annotations

import re
import sys
import threading
import unicodedata
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from typing import Any

_POSIX = {"ASCII": r"\x00-\x7f", "Alnum": "a-zA-Z0-9", "Alpha": "a-zA-Z", "Digit": "0-9", "Print": r"\x20-\x7e",
          "Graph": r"\x21-\x7e", "Punct": r"!-/:-@\[-`{-~", "Space": r" \t\n\x0b\f\r", "Upper": "A-Z", "Lower": "a-z"}


@cache
def _categories() -> dict[str, str]:
    """Unicode general category (L, Lu, Zs, ...) -> a character-class body of its code points, in one pass."""
    ranges: dict[str, list[list[int]]] = {}
    for code in range(sys.maxunicode + 1):
        category = unicodedata.category(chr(code))
        for key in (category[0], category):
            spans = ranges.setdefault(key, [])
            if spans and spans[-1][1] == code - 1:
                spans[-1][1] = code
            else:
                spans.append([code, code])
    return {key: "".join(f"\\U{a:08x}" if a == b else f"\\U{a:08x}-\\U{b:08x}" for a, b in spans)
            for key, spans in ranges.items()}


def _class_body(name: str) -> str:
    return _POSIX[name] if name in _POSIX else _categories()[name]


@cache
def compile_pattern(pattern: str) -> re.Pattern[str]:
    """A Java pattern from a botocore model as a Python regular expression (see the module docstring)."""
    translated = pattern.replace(r"\uD800\uDC00-\uDBFF\uDFFF", r"\U00010000-\U0010FFFF")
    translated = re.sub(r"\\w-", r"\\w\\-", translated)
    translated = re.sub(r"\$\{\d+,\d+\}", "$", translated)  # Java accepts a (meaningless) quantifier on $
    translated = re.sub(r"(?<!\\)((?:\\\\)*)\\z", r"\1\\Z", translated)  # Java's end of input is Python's \Z

    def expand(text: str) -> str:
        out, i, depth = [], 0, 0
        while i < len(text):
            if text.startswith("\\p{", i):
                end = text.index("}", i)
                body = _class_body(text[i + 3:end])
                out.append(body if depth else f"[{body}]")
                i = end + 1
                continue
            ch = text[i]
            if ch == "\\":
                out.append(text[i:i + 2])
                i += 2
                continue
            depth += ch == "["
            depth -= ch == "]" and depth > 0
            out.append(ch)
            i += 1
        return "".join(out)

    return re.compile(expand(translated))


@cache
def _service(service: str) -> Any:
    import botocore.session

    return botocore.session.get_session().get_service_model(service)


def request_errors(service: str, operation: str, body: dict[str, Any]) -> list[str]:
    """Every way `body` breaks `operation`'s input shape: botocore's own report, then the strict walk."""
    from botocore.validate import ParamValidator

    shape = _service(service).operation_model(operation).input_shape
    report = botocore_validate(ParamValidator(), body, shape)
    errors = [line.strip() for line in report.generate_report().splitlines() if line.strip()] \
        if report.has_errors() else []
    _walk(body, shape, operation, errors)
    return errors


def botocore_validate(validator: Any, params: Any, shape: Any) -> Any:
    """botocore's own validation alone (what the SDK runs before sending), even where check_every_request is on."""
    from botocore.validate import ParamValidator

    return getattr(ParamValidator.validate, "botocore", ParamValidator.validate)(validator, params, shape)


def assert_valid_request(service: str, operation: str, body: dict[str, Any]) -> None:
    errors = request_errors(service, operation, body)
    assert not errors, f"{service} {operation}:\n  " + "\n  ".join(errors)


def pattern_shapes(services: tuple[str, ...]) -> Iterator[tuple[str, str, str]]:
    """(service, shape name, pattern) of every shape with a pattern in these services' models."""
    for service in services:
        model = _service(service)
        for name in model.shape_names:
            pattern = model.shape_for(name).metadata.get("pattern")
            if pattern:
                yield service, name, pattern


def precompile(services: tuple[str, ...]) -> None:
    """Compile every pattern of these services now (and the Unicode category table, 0.5 s of CPU): the fork
    server does this once, so its children do not each build the table on their first checked request."""
    for _, _, pattern in pattern_shapes(services):
        compile_pattern(pattern)


def _walk(value: Any, shape: Any, name: str, errors: list[str]) -> None:
    meta, kind = shape.metadata, shape.type_name
    if kind == "structure":
        if isinstance(value, dict):
            for key, member in value.items():
                if key in shape.members:
                    _walk(member, shape.members[key], f"{name}.{key}", errors)
        return
    if kind == "list":
        if isinstance(value, (list, tuple)):
            _length(len(value), meta, name, errors, "items", botocore_checks_min=True)
            for i, item in enumerate(value):
                _walk(item, shape.member, f"{name}[{i}]", errors)
        return
    if kind == "map":
        if isinstance(value, dict):
            _length(len(value), meta, name, errors, "entries", botocore_checks_min=False)
            for key, item in value.items():
                _walk(key, shape.key, f"{name} (key {key!r})", errors)
                _walk(item, shape.value, f"{name}.{key}", errors)
        return
    if kind == "string" and isinstance(value, str):
        enum = shape.enum
        if enum and value not in enum:
            errors.append(f"{name}: {value!r} is not one of the {len(enum)} values of {shape.name}")
        _length(len(value), meta, name, errors, "characters", botocore_checks_min=True)
        pattern = meta.get("pattern")
        if pattern and not compile_pattern(pattern).fullmatch(value):
            errors.append(f"{name}: {value!r} does not match {shape.name}'s pattern {pattern}")
        return
    if kind in ("integer", "long", "double", "float") and isinstance(value, (int, float)) \
            and not isinstance(value, bool):
        if "max" in meta and value > meta["max"]:
            errors.append(f"{name}: {value} is above the maximum {meta['max']} of {shape.name}")


def _length(length: int, meta: dict[str, Any], name: str, errors: list[str], unit: str, *,
            botocore_checks_min: bool) -> None:
    if "min" in meta and length < meta["min"] and not botocore_checks_min:
        errors.append(f"{name}: {length} {unit}, fewer than the minimum {meta['min']}")
    if "max" in meta and length > meta["max"]:
        errors.append(f"{name}: {length} {unit}, more than the maximum {meta['max']}")


_lenient = threading.local()


@contextmanager
def sent_as_is() -> Iterator[None]:
    """Within: this thread's requests skip the strict walk (botocore's own checks stay), for a test whose subject
    is what the emulator does with a body AWS would refuse."""
    _lenient.on = True
    try:
        yield
    finally:
        _lenient.on = False


class StrictShapeError(AssertionError):
    """A request body the SDK would send that breaks a constraint of the service's model (AWS would refuse it)."""


def check_every_request() -> None:
    """From now on, in this process, every request an SDK client serializes is also walked strictly: a body
    that breaks an enum, a maximum, a length or a pattern raises StrictShapeError before it is sent, whichever
    command, emulator mode or test built it. Installed by conftest (the pytest process) and the fork server
    (its children); the installed executable keeps botocore as it is."""
    from botocore.validate import ParamValidator

    if getattr(ParamValidator.validate, "strict", False):
        return
    validate = ParamValidator.validate

    def strict_validate(self: Any, params: Any, shape: Any) -> Any:
        report = validate(self, params, shape)
        errors: list[str] = []
        if shape is not None and not report.has_errors() and not getattr(_lenient, "on", False):
            _walk(params, shape, shape.name, errors)
        if errors:
            raise StrictShapeError("a request AWS would refuse (tests/aws_shapes.py):\n  " + "\n  ".join(errors))
        return report

    strict_validate.strict = True  # type: ignore[attr-defined]
    strict_validate.botocore = validate  # type: ignore[attr-defined]
    ParamValidator.validate = strict_validate  # type: ignore[method-assign]
