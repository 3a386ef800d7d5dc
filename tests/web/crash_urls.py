"""A URLconf whose only view fails, for the 500-page test (never installed outside tests)."""

from django.urls import path


def crash(request):
    secret_local = request.POST.get("document", "")  # noqa: F841 - must not be shown
    raise RuntimeError("boom in a view")


urlpatterns = [path("crash/", crash)]
