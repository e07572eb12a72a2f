"""Length limits on every string a tool accepts, defined once.

A value past its limit is refused by the tool's schema (BAD_INPUT naming the field, never quoting
the value) before any code hashes, matches, stores or sends it to a box. Each limit sits at or
above what the field's own check accepts, so that check still explains a value that is merely
wrong (an unsafe run name, a run id with a slash) in its own words."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import PydanticCustomError, core_schema

from mcp_server.globs import MAX_PATTERN

PATH_MAX = 4096  # Linux PATH_MAX
ID_MAX = 256  # run ids (96 at most) and names (64), tokens, actions, keys, columns, revisions, file names
HOST_MAX = 512  # "local", an inventory name, an ssh alias or user@host:port (at most 324 characters)
PATTERN_MAX = MAX_PATTERN  # a roster entry or glob: the matcher refuses longer patterns anyway
URL_MAX = 4096  # what the fetch request itself accepts
VALUE_MAX = 4096  # one inline data value: a sample id, a content hash, a flag, a label
COMMAND_MAX = 64_000  # a launch command: what the launch request itself accepts
MAP_MAX = 1000  # entries in a map no other rule bounds (env, expected files, inline config)


@dataclass(frozen=True)
class MaxLength:
    """`maxLength` in the schema, checked after the string is read: unlike pydantic's own
    `max_length` it accepts a lone surrogate, so the tool's own check can name that argument and
    say to send valid UTF-8 (pydantic's would say only "unable to parse raw data")."""

    limit: int

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        return core_schema.no_info_after_validator_function(self._check, handler(source))

    def __get_pydantic_json_schema__(self, schema: core_schema.CoreSchema,
                                     handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        found = handler(schema)
        found["maxLength"] = self.limit
        return found

    def _check(self, value: str) -> str:
        if len(value) > self.limit:  # the same error pydantic's max_length gives, without the value
            raise PydanticCustomError("string_too_long", "String should have at most {max_length} characters",
                                      {"max_length": self.limit})
        return value


HostStr = Annotated[str, MaxLength(HOST_MAX)]
IdStr = Annotated[str, MaxLength(ID_MAX)]
PathStr = Annotated[str, MaxLength(PATH_MAX)]
PatternStr = Annotated[str, MaxLength(PATTERN_MAX)]
UrlStr = Annotated[str, MaxLength(URL_MAX)]
ValueStr = Annotated[str, MaxLength(VALUE_MAX)]
CommandStr = Annotated[str, MaxLength(COMMAND_MAX)]
