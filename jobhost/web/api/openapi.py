"""The OpenAPI 3.1 document of ``/api/v1``, generated from the endpoint table
(:mod:`jobhost.web.api.table`) and the very pydantic models that validate its bodies, answers
and query strings."""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache
from typing import Any, TypeGuard

from pydantic import BaseModel, TypeAdapter
from pydantic.json_schema import models_json_schema

from jobhost.web.api.models import Problem
from jobhost.web.api.table import ENDPOINTS, PATH_PARAMETERS, Endpoint
from jobhost.web.middleware import NO_NUL_PATTERN

__all__ = ["is_model", "openapi_document"]

_REF = "#/components/schemas/{model}"
_STRING = {"type": "string"}
_SchemaOf = Callable[[Any], dict[str, Any]]


@cache
def openapi_document() -> dict[str, Any]:
    bodies = [b for e in ENDPOINTS for b in (e.body, *(a.body for a in e.answers.values()))]
    models = sorted(set(filter(is_model, [Problem, *bodies])), key=lambda model: model.__name__)
    refs, definitions = models_json_schema([(m, "validation") for m in models], ref_template=_REF)

    def schema_of(body: Any) -> dict[str, Any]:
        if is_model(body):
            return dict(refs[(body, "validation")])
        return TypeAdapter(body).json_schema(ref_template=_REF)

    paths: dict[str, dict[str, Any]] = {}
    for endpoint in ENDPOINTS:
        paths.setdefault(endpoint.path, {})[endpoint.method.lower()] = _operation(
            endpoint, schema_of
        )
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "jobhost API",
            "version": "1",
            "description": "Job kinds and runtime jobs: create, change, pause, trigger and remove "
            "jobs while the hosts run. Errors are application/problem+json.",
        },
        "servers": [{"url": "/api/v1"}],
        "security": [{"bearer": []}],
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": definitions.get("$defs", {}),
        },
        "paths": paths,
    }


def is_model(body: object) -> TypeGuard[type[BaseModel]]:
    """A pydantic model, not another type such as ``dict[str, Any]``."""
    return isinstance(body, type) and issubclass(body, BaseModel)


def _operation(endpoint: Endpoint, schema_of: _SchemaOf) -> dict[str, Any]:
    operation: dict[str, Any] = {
        "operationId": endpoint.operation,
        "summary": endpoint.summary,
        "parameters": _parameters(endpoint),
        "responses": _responses(endpoint, schema_of),
    }
    if endpoint.scope is None:
        operation["security"] = []
    else:
        operation["description"] = f"Scope: {endpoint.scope}."
    if endpoint.body is not None:
        operation["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": schema_of(endpoint.body)}},
        }
    return operation


def _parameter(name: str, where: str, description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": name,
        "in": where,
        "required": where == "path",
        "description": description,
        "schema": schema,
    }


def _parameters(endpoint: Endpoint) -> list[dict[str, Any]]:
    parameters = [
        _parameter(name, "path", PATH_PARAMETERS[name][0], _without_nul(PATH_PARAMETERS[name][1]))
        for name in re.findall(r"\{(\w+)\}", endpoint.path)
    ]
    parameters += [_parameter(n, "header", text, _STRING) for n, text in endpoint.headers.items()]
    query = endpoint.query.model_json_schema()["properties"] if endpoint.query else {}
    for name, schema in query.items():
        described = {k: v for k, v in schema.items() if k not in {"title", "default"}}
        description = described.pop("description", "")
        parameters.append(_parameter(name, "query", description, _without_nul(described)))
    return parameters


def _without_nul(schema: dict[str, Any]) -> dict[str, Any]:
    """A string's schema refuses NUL (as RefuseNul does): by its own pattern, or by ours."""
    if schema.get("type") == "string" and "pattern" not in schema:
        return {**schema, "pattern": NO_NUL_PATTERN}
    if schema.get("type") == "array":
        return {**schema, "items": _without_nul(schema.get("items", {}))}
    return schema


def _responses(endpoint: Endpoint, schema_of: _SchemaOf) -> dict[str, Any]:
    responses: dict[str, Any] = {}
    for status, answer in endpoint.answers.items():
        response: dict[str, Any] = {"description": answer.description}
        if answer.headers:
            response["headers"] = {
                name: {"description": text, "schema": _STRING}
                for name, text in answer.headers.items()
            }
        if answer.body is not None:
            response["content"] = {"application/json": {"schema": schema_of(answer.body)}}
        responses[str(status)] = response
    if endpoint.scope is not None:  # the document itself answers no error
        responses["default"] = {
            "description": "An error: what is wrong, the field, and the fix.",
            "content": {"application/problem+json": {"schema": schema_of(Problem)}},
        }
    return responses
