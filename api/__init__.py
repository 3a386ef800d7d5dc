"""Trainboard's JSON API: what the pages do, for code, with personal tokens.

Built on django-ninja: its routes are typed with pydantic (which the engine already uses), it
writes the OpenAPI schema and serves its docs page from its own static files (no CDN: the
dashboard runs offline), and its bearer authentication and throttles are a few lines. Django
REST framework would bring a second serialisation layer beside pydantic for the same result.

Every route calls the same services and selectors as the pages (ownership, validation,
forecast, caps): the API is another door, never another rule.
"""
