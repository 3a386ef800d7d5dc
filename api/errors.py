"""Errors as JSON: ``{"detail": what is wrong, "field": where}`` (field null when it is the
request as a whole), never an HTML page or a traceback."""

from __future__ import annotations

import logging
from typing import Any

from django.http import Http404
from ninja.errors import AuthenticationError, HttpError, Throttled, ValidationError

from core.bounded_json import UnsafeJSON, loads_bounded

logger = logging.getLogger(__name__)

#: The first part of a ninja error's location when it names where the value was read.
SOURCES = ("body", "query", "path", "form", "file", "header", "cookie")


class FieldError(Exception):
    """A bad value: answered 400 naming the field (or 409 for a state that refuses it)."""

    def __init__(self, detail: str, field: str | None = None, status: int = 400):
        super().__init__(detail)
        self.detail, self.field, self.status = detail, field, status


def from_form(form) -> FieldError:
    """The first problem of an invalid Django form, as the page would show it."""
    for name, errors in form.errors.items():
        return FieldError(str(errors[0]), None if name == "__all__" else name)
    return FieldError("The request is not valid.")


def json_object(request, max_bytes: int, max_nesting: int, what: str) -> dict[str, Any]:
    """The request's body as a JSON object, bounded in size and nesting before it is parsed;
    a FieldError saying what is wrong (``what``: what the object holds) otherwise."""
    try:
        body = loads_bounded(request.body or b"{}", max_bytes, max_nesting)
    except UnsafeJSON as exc:
        raise FieldError(str(exc)) from None
    if not isinstance(body, dict):
        raise FieldError(f"the body is a JSON object of {what}")
    return body


def install(api) -> None:
    def answer(request, status: int, detail: str, field: Any = None):
        return api.create_response(request, {"detail": detail, "field": field}, status=status)

    @api.exception_handler(FieldError)
    def field_error(request, exc: FieldError):
        return answer(request, exc.status, exc.detail, exc.field)

    @api.exception_handler(ValidationError)
    def validation_error(request, exc: ValidationError):
        first = exc.errors[0] if exc.errors else {}
        where = [str(part) for part in first.get("loc", ())]
        if where and where[0] in SOURCES:  # where ninja read it from, not the field
            where = where[1:]
        if where and where[0] == "payload":  # the name ninja gives a form's whole body
            where = where[1:]
        return answer(
            request, 422, str(first.get("msg", "invalid request")), ".".join(where) or None
        )

    @api.exception_handler(Http404)
    def not_found(request, exc):
        return answer(request, 404, "Not found (or not yours).")

    @api.exception_handler(AuthenticationError)
    def unauthenticated(request, exc):
        return answer(request, 401, "A live personal token is needed: Authorization: Bearer tb_…")

    @api.exception_handler(Throttled)
    def throttled(request, exc: Throttled):
        response = answer(request, 429, "Too many requests for this token; wait and retry.")
        if exc.wait:
            response["Retry-After"] = str(int(exc.wait) + 1)
        return response

    @api.exception_handler(Exception)
    def unexpected(request, exc: Exception):
        logger.exception("API %s %s failed", request.method, request.path)
        return answer(request, 500, "The server failed on this request; the error is logged.")

    @api.exception_handler(HttpError)
    def http_error(request, exc: HttpError):
        return answer(request, exc.status_code, str(exc))
