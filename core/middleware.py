"""Login required everywhere, with an htmx-friendly refusal.

Django's LoginRequiredMiddleware redirects anonymous requests to LOGIN_URL. For htmx
requests a 302 would swap the login page into a fragment, so those get 401 plus an
HX-Redirect header that makes htmx load the login page as a whole page.
"""

from django.conf import settings
from django.contrib.auth.middleware import LoginRequiredMiddleware as DjangoLoginRequired
from django.http import HttpResponse
from django.shortcuts import resolve_url
from django.utils.http import urlencode


class LoginRequiredMiddleware(DjangoLoginRequired):
    def handle_no_permission(self, request, view_func):
        if request.headers.get("HX-Request") == "true":
            response = HttpResponse("Login required.", status=401, content_type="text/plain")
            login = resolve_url(settings.LOGIN_URL)
            response["HX-Redirect"] = f"{login}?{urlencode({'next': request.get_full_path()})}"
            return response
        return super().handle_no_permission(request, view_func)
